package decide

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Response is the answer to one request (format.md "Response").
type Response struct {
	// Answers holds one answer per question, in the request's order.
	Answers Answers `json:"answers" msgpack:"answers"`
	// Tokens counts the positions the model computed for this request,
	// padding excluded.
	Tokens int `json:"tokens" msgpack:"tokens"`
	// CachedTokens counts the positions whose state came from snapshots
	// made before this request (the preamble, a kept evidence prefix).
	CachedTokens int `json:"cached_tokens" msgpack:"cached_tokens"`
	// ElapsedMS is the wall time the request took, in milliseconds.
	ElapsedMS float64 `json:"elapsed_ms" msgpack:"elapsed_ms"`
}

// Answer is the answer to one question.
type Answer struct {
	// Name is the question's name (the key it is written under).
	Name string `json:"-" msgpack:"-"`
	// Options are the option ids in order: strings, or ints for score.
	Options []any `json:"options" msgpack:"options"`
	// Probs are the options' probabilities.
	Probs []float64 `json:"probs" msgpack:"probs"`
	// Answer is the id of the most probable option (the earliest on ties).
	Answer any `json:"answer" msgpack:"answer"`
	// Expected is Σ i·p_i, for score questions only.
	Expected *float64 `json:"expected,omitempty" msgpack:"expected,omitempty"`
	// Scores, for in-process callers (evaluation and calibration; it is
	// never sent), are the letter logits the probabilities were read from:
	// Scores[s][j] is the logit of letter j in the row that shows the
	// options rotated by s (one row unless the question is permuted; see
	// [Config.Logits]). Nil for a question ranked in groups (more options
	// than wide_choice.group) and for pointer/1 checkpoints.
	Scores [][]float32 `json:"-" msgpack:"-"`
}

// Answers is the ordered map of answers by question name.
type Answers []Answer

var (
	_ json.Marshaler        = Answers(nil)
	_ json.Unmarshaler      = (*Answers)(nil)
	_ msgpack.CustomEncoder = Answers(nil)
	_ msgpack.CustomDecoder = (*Answers)(nil)
)

// Get returns the answer to the named question, or nil.
func (as Answers) Get(name string) *Answer {
	for i := range as {
		if as[i].Name == name {
			return &as[i]
		}
	}
	return nil
}

// MarshalJSON writes the answers as an object keyed by question name, in order.
func (as Answers) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(as[i].Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(&as[i])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object of answers keeping its order.
func (as *Answers) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("decide: answers must be an object")
	}
	*as = (*as)[:0]
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var a Answer
		if err := dec.Decode(&a); err != nil {
			return err
		}
		a.Name = t.(string)
		*as = append(*as, a)
	}
	_, err := dec.Token()
	return err
}

// EncodeMsgpack writes the answers as a map keyed by question name, in order.
func (as Answers) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(len(as)); err != nil {
		return err
	}
	for i := range as {
		if err := enc.EncodeString(as[i].Name); err != nil {
			return err
		}
		if err := enc.Encode(&as[i]); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads a map of answers keeping its order.
func (as *Answers) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	*as = make(Answers, 0, max(n, 0))
	for i := 0; i < n; i++ {
		name, err := dec.DecodeString()
		if err != nil {
			return err
		}
		var a Answer
		if err := dec.Decode(&a); err != nil {
			return err
		}
		a.Name = name
		*as = append(*as, a)
	}
	return nil
}

// makeAnswer builds a question's answer from its final probabilities.
func makeAnswer(q *Question, opts []Option, probs []float64) Answer {
	a := Answer{Name: q.Name, Options: make([]any, len(opts)), Probs: probs}
	best := 0
	for i, o := range opts {
		a.Options[i] = o.ID
		if probs[i] > probs[best] {
			best = i
		}
	}
	a.Answer = opts[best].ID
	if q.Type == Score {
		var e float64
		for i, p := range probs {
			e += float64(i) * p
		}
		a.Expected = &e
	}
	return a
}
