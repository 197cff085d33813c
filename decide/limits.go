package decide

import (
	"errors"
	"fmt"

	"github.com/startlux/startlux/tokenizer"
	"github.com/startlux/startlux/value"
)

// The default per-request limits (Options.Limits). What a request document
// may hold before it is a request is bounded by package value (MaxDepth,
// MaxValues).
const (
	// DefaultMaxQuestions is the most questions a request may ask.
	DefaultMaxQuestions = 256
	// DefaultMaxRequestTokens bounds the tokens of every row a request
	// renders, all questions and wide-choice stages together.
	DefaultMaxRequestTokens = 262144
)

// Limits bound what one request may make the engine hold and compute; a
// request over any of them is refused before anything runs, with an error
// naming the limit and the value found.
type Limits struct {
	// MaxQuestions is the most questions of a request (0: the default).
	MaxQuestions int `json:"max_questions"`
	// MaxEvidenceTokens is the most tokens of a request's rendered
	// evidence: the model's position limit (set by the engine; ignored in
	// Options).
	MaxEvidenceTokens int `json:"max_evidence_tokens"`
	// MaxRequestTokens bounds the tokens of all the rows a request renders
	// (0: the default).
	MaxRequestTokens int `json:"max_request_tokens"`
}

// withDefaults fills the zero fields and the model's position limit.
func (l Limits) withDefaults(maxPositions int) Limits {
	if l.MaxQuestions <= 0 {
		l.MaxQuestions = DefaultMaxQuestions
	}
	if l.MaxRequestTokens <= 0 {
		l.MaxRequestTokens = DefaultMaxRequestTokens
	}
	l.MaxEvidenceTokens = maxPositions
	return l
}

// validatedEvidence validates r against the request limits and renders its
// evidence: the first step of preparing a request of either checkpoint
// family. maxBytes bounds the rendered evidence's bytes (0: none): evidence
// whose strings alone are longer is refused without rendering it.
func validatedEvidence(r *Request, lim Limits, maxBytes int) (string, error) {
	if r == nil {
		return "", &RequestError{Message: "no request"}
	}
	if n := len(r.Questions); n > lim.MaxQuestions {
		return "", &RequestError{Field: "questions", Message: fmt.Sprintf("%d questions; a request may ask at most %d (max_questions)", n, lim.MaxQuestions)}
	}
	if err := r.Validate(); err != nil {
		return "", err
	}
	if n := minRenderedBytes(&r.Evidence); maxBytes > 0 && n > maxBytes {
		return "", &RequestError{Field: "evidence", Message: fmt.Sprintf("too long: its text is at least %d bytes, so more than the %d tokens the model takes (max_evidence_tokens)", n, lim.MaxEvidenceTokens)}
	}
	return RenderJSON(&r.Evidence)
}

// minRenderedBytes returns a lower bound of the bytes RenderJSON makes of
// v, without rendering it: the bytes of its strings and keys, and one per
// other value.
func minRenderedBytes(v *value.Value) int {
	switch v.Kind {
	case value.String:
		return len(v.Str)
	case value.Array:
		n := 2
		for i := range v.Arr {
			n += minRenderedBytes(&v.Arr[i])
		}
		return n
	case value.Object:
		n := 2
		for i := range v.Obj {
			n += len(v.Obj[i].Key) + minRenderedBytes(&v.Obj[i].Value)
		}
		return n
	}
	return 1
}

// evidenceTokens tokenises rendered evidence within the model's limit,
// refusing it when longer.
func evidenceTokens(tok Encoder, ev string, lim Limits) ([]int32, error) {
	ids, err := tok.EncodeLimit(ev, lim.MaxEvidenceTokens)
	var le *tokenizer.LimitError
	if errors.As(err, &le) {
		return nil, &RequestError{Field: "evidence", Message: fmt.Sprintf("too long: %s, the model takes at most %d (max_evidence_tokens)", tokensFound(le), lim.MaxEvidenceTokens)}
	}
	return ids, err
}

// tokensFound says what EncodeLimit found: at least N tokens, or a word too
// long.
func tokensFound(le *tokenizer.LimitError) string {
	if le.Word > 0 {
		return le.Error()
	}
	return fmt.Sprintf("at least %d tokens", le.AtLeast)
}

// requestTokens counts the tokens a request renders against
// Limits.MaxRequestTokens.
type requestTokens struct {
	n, max int
}

// add counts n more tokens and returns the request's error once they pass
// the limit.
func (t *requestTokens) add(n int) error {
	t.n += n
	if t.n > t.max {
		return &RequestError{Message: fmt.Sprintf("the request renders more than %d tokens (at least %d, evidence counted in every question's rows; max_request_tokens): ask fewer questions at once, or about shorter evidence", t.max, t.n)}
	}
	return nil
}

// rowLimit collects, question by question, which rows exceed the model's
// position limit, and turns that into the request's error: the evidence is
// to blame when every question's row is too long and the evidence takes most
// of the limit, otherwise the first question whose row is.
type rowLimit struct {
	limit     int // the model's limit; ≤ 0 means none
	evidence  int // the evidence's tokens in a row
	tooLong   int // questions over the limit
	shortest  int // the shortest of their rows
	firstLong *RequestError
}

// add records question q, whose longest row has (at least) n positions.
func (l *rowLimit) add(q *Question, n int) {
	if l.limit <= 0 || n <= l.limit {
		return
	}
	if l.tooLong == 0 || n < l.shortest {
		l.shortest = n
	}
	l.tooLong++
	if l.firstLong == nil {
		field := "instructions"
		if q.Type != Noul {
			field = "criteria"
		}
		l.firstLong = &RequestError{Question: q.Name, Field: field,
			Message: fmt.Sprintf("its rows reach at least %d tokens, %d of them the evidence; the model takes at most %d", n, l.evidence, l.limit)}
	}
}

// err returns the request's error for a request of questions questions, or
// nil when every row fits.
func (l *rowLimit) err(questions int) error {
	switch {
	case l.tooLong > 0 && l.tooLong == questions && 2*l.evidence > l.limit:
		return &RequestError{Field: "evidence", Message: fmt.Sprintf("too long: it takes %d of the model's %d tokens (max_evidence_tokens), and with it every question's row exceeds them (the shortest has at least %d)", l.evidence, l.limit, l.shortest)}
	case l.firstLong != nil:
		return l.firstLong
	}
	return nil
}

// encodeRow tokenises one row's text within the model's limit; when it is
// longer, it returns nil and the least it could be.
func encodeRow(tok Encoder, text string, limit int) (ids []int32, atLeast int, err error) {
	ids, err = tok.EncodeLimit(text, limit)
	var le *tokenizer.LimitError
	if errors.As(err, &le) {
		if le.Word > 0 {
			return nil, 0, &RequestError{Message: "a row holds " + le.Error()}
		}
		return nil, le.AtLeast, nil
	}
	return ids, len(ids), err
}
