package decide

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/startlux/startlux/value"
)

// QuestionType is the type of a question: noul, choice or score.
type QuestionType string

// The question types of jevfmt/1.
const (
	Noul   QuestionType = "noul"   // yes / no / the evidence does not say
	Choice QuestionType = "choice" // criteria: an object {id: label}
	Score  QuestionType = "score"  // criteria: a list of level labels; ids 0..n-1
)

// Limits on the options of a question.
const (
	MinOptions = 2
	MaxOptions = 1000
	// MaxPermuteOptions bounds the options of a permuted question: one row
	// per cyclic shift, each a single letter row (no wide-choice groups).
	MaxPermuteOptions = 25
)

// Request is one decision request: evidence (any JSON value, key order kept)
// and named questions in the order the client sent them. Permute asks for
// every question to be read over all cyclic shifts of its options (see
// [Question.Permute]).
type Request struct {
	Evidence  value.Value
	Questions []Question
	Permute   bool
}

// Question is one question of a request. Criteria is the value received
// (the zero Value when absent); [Question.Options] interprets it. Permute,
// when set, says whether the question is read over every cyclic shift of its
// options (each shift one more row of the same pass, the per-option logits
// averaged before the softmax); nil follows the request's Permute.
type Question struct {
	Name         string
	Type         QuestionType
	Instructions string
	Criteria     value.Value
	Permute      *bool
}

// Permuted reports whether question q of r is read over every cyclic shift
// of its options: its own permute field, or the request's when it has none.
func (r *Request) Permuted(q *Question) bool {
	if q.Permute != nil {
		return *q.Permute
	}
	return r.Permute
}

// Option is one option of a question: ID is a string (noul and choice) or an
// int (score), Label the text shown in the prompt.
type Option struct {
	ID    any
	Label string
}

// noulOptions are the fixed options of a noul question.
var noulOptions = [...]Option{{"yes", "yes"}, {"no", "no"}, {"unknown", "the evidence does not say"}}

// ParseJSON parses and validates a request from JSON: [value.ParseJSON],
// then [Read]. Every problem is a *RequestError.
func ParseJSON(data []byte) (*Request, error) {
	v, err := value.ParseJSON(data)
	return Read(&v, err)
}

// Read validates a request parsed into a value tree (by value.ParseJSON or
// value.ParseMsgpack, or a frame's params as package ipc decodes them). err
// is the error of parsing it, if any: a *value.Error becomes the
// *RequestError naming where in the request it is, any other error is
// returned as it is. Every problem with the request is a *RequestError.
func Read(v *value.Value, err error) (*Request, error) {
	if err != nil {
		return nil, parseError(err)
	}
	return requestFromValue(v)
}

// ParseJSONBatch parses many requests from JSON: an array of requests or an
// object {"requests": [...]}. A document that cannot be read fails as a
// whole (err); otherwise each request is parsed on its own and a bad one
// gets its error at its index in errs, its *Request being nil.
func ParseJSONBatch(data []byte) (reqs []*Request, errs []error, err error) {
	v, err := value.ParseJSON(data)
	return ReadBatch(&v, err)
}

// ReadBatch is [ParseJSONBatch] for a document parsed into a value tree,
// err being the error of parsing it, as for [Read].
func ReadBatch(v *value.Value, err error) (reqs []*Request, errs []error, _ error) {
	if err != nil {
		return nil, nil, parseError(err)
	}
	return batchFromValue(v)
}

// parseError turns the error of parsing a document into the
// *RequestError naming where it is.
func parseError(err error) error {
	var ve *value.Error
	if !errors.As(err, &ve) {
		return err
	}
	return pathStepsError(ve.Path, ve.Message)
}

func batchFromValue(v *value.Value) ([]*Request, []error, error) {
	list := v
	if v.Kind == value.Object {
		rs, ok := v.Get("requests")
		if !ok || len(v.Obj) != 1 {
			return nil, nil, &RequestError{Field: "requests", Message: "a batch is an array of requests or an object with just \"requests\""}
		}
		list = rs
	}
	if list.Kind != value.Array {
		return nil, nil, &RequestError{Field: "requests", Message: "a batch is an array of requests, got " + list.Kind.String()}
	}
	reqs := make([]*Request, len(list.Arr))
	errs := make([]error, len(list.Arr))
	for i := range list.Arr {
		reqs[i], errs[i] = requestFromValue(&list.Arr[i])
	}
	return reqs, errs, nil
}

// requestFromValue converts and validates a parsed request.
func requestFromValue(v *value.Value) (*Request, error) {
	if v.Kind != value.Object {
		return nil, &RequestError{Message: "a request is an object with evidence and questions, got " + v.Kind.String()}
	}
	r := &Request{}
	var haveEvidence, haveQuestions bool
	for i := range v.Obj {
		m := &v.Obj[i]
		switch m.Key {
		case "evidence":
			r.Evidence, haveEvidence = m.Value, true
		case "permute":
			if m.Value.Kind != value.Bool {
				return nil, &RequestError{Field: "permute", Message: "must be true or false, got " + m.Value.Kind.String()}
			}
			r.Permute = m.Value.Bool
		case "questions":
			haveQuestions = true
			if m.Value.Kind != value.Object {
				return nil, &RequestError{Field: "questions", Message: "must be an object {name: question}, got " + m.Value.Kind.String()}
			}
			for j := range m.Value.Obj {
				q, err := questionFromValue(m.Value.Obj[j].Key, &m.Value.Obj[j].Value)
				if err != nil {
					return nil, err
				}
				r.Questions = append(r.Questions, q)
			}
		default:
			return nil, &RequestError{Field: m.Key, Message: "unknown field (a request has evidence, questions and permute)"}
		}
	}
	if !haveEvidence {
		return nil, &RequestError{Field: "evidence", Message: "missing (use null for none)"}
	}
	if !haveQuestions {
		return nil, &RequestError{Field: "questions", Message: "missing"}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func questionFromValue(name string, v *value.Value) (Question, error) {
	q := Question{Name: name}
	if v.Kind != value.Object {
		return q, &RequestError{Question: name, Message: "a question is an object with type, instructions and criteria, got " + v.Kind.String()}
	}
	for i := range v.Obj {
		m := &v.Obj[i]
		switch m.Key {
		case "type":
			if m.Value.Kind != value.String {
				return q, &RequestError{Question: name, Field: "type", Message: "must be a string (noul, choice or score), got " + m.Value.Kind.String()}
			}
			q.Type = QuestionType(m.Value.Str)
		case "instructions":
			if m.Value.Kind != value.String {
				return q, &RequestError{Question: name, Field: "instructions", Message: "must be a string, got " + m.Value.Kind.String()}
			}
			q.Instructions = m.Value.Str
		case "criteria":
			q.Criteria = m.Value
		case "permute":
			if m.Value.Kind != value.Bool {
				return q, &RequestError{Question: name, Field: "permute", Message: "must be true or false, got " + m.Value.Kind.String()}
			}
			b := m.Value.Bool
			q.Permute = &b
		default:
			return q, &RequestError{Question: name, Field: m.Key, Message: "unknown field (a question has type, instructions, criteria and permute)"}
		}
	}
	if _, ok := v.Get("type"); !ok {
		return q, &RequestError{Question: name, Field: "type", Message: "missing (noul, choice or score)"}
	}
	if _, ok := v.Get("instructions"); !ok {
		return q, &RequestError{Question: name, Field: "instructions", Message: "missing"}
	}
	return q, nil
}

// Validate checks the request as format.md says: at least one question, each
// with a known type, non-empty instructions and criteria of the right shape,
// and evidence without non-finite numbers. Limits that depend on the model
// (row lengths) are checked by the engine.
func (r *Request) Validate() error {
	if p := checkValue(&r.Evidence, joinPath(nil, "evidence")); p != nil {
		return p
	}
	if len(r.Questions) == 0 {
		return &RequestError{Field: "questions", Message: "no questions"}
	}
	seen := make(map[string]bool, len(r.Questions))
	for i := range r.Questions {
		q := &r.Questions[i]
		if seen[q.Name] {
			return &RequestError{Field: "questions", Message: fmt.Sprintf("duplicate question name %q", q.Name)}
		}
		seen[q.Name] = true
		opts, err := q.Options()
		if err != nil {
			return err
		}
		if r.Permuted(q) && len(opts) > MaxPermuteOptions {
			return &RequestError{Question: q.Name, Field: "permute",
				Message: fmt.Sprintf("%d options: a permuted question takes at most %d (one row per cyclic shift, no wide-choice groups)", len(opts), MaxPermuteOptions)}
		}
		if q.Instructions == "" {
			return &RequestError{Question: q.Name, Field: "instructions", Message: "must not be empty"}
		}
		if !validUTF8(q.Instructions) {
			return &RequestError{Question: q.Name, Field: "instructions", Message: "not valid UTF-8"}
		}
	}
	return nil
}

// checkValue returns an error for the first non-finite float or invalid
// UTF-8 string in v, or nil.
func checkValue(v *value.Value, path *pathNode) *RequestError {
	switch v.Kind {
	case value.Float:
		if p := checkFinite(v, path); p != nil {
			return pathError(p, "non-finite number")
		}
	case value.String:
		if !validUTF8(v.Str) {
			return pathError(path, "string is not valid UTF-8")
		}
	case value.Array:
		for i := range v.Arr {
			if e := checkValue(&v.Arr[i], indexPath(path, i)); e != nil {
				return e
			}
		}
	case value.Object:
		for i := range v.Obj {
			if !validUTF8(v.Obj[i].Key) {
				return pathError(path, "key is not valid UTF-8")
			}
			if e := checkValue(&v.Obj[i].Value, joinPath(path, v.Obj[i].Key)); e != nil {
				return e
			}
		}
	}
	return nil
}

// Options returns the question's options in the order they are shown, or a
// *RequestError when its type or criteria are wrong.
func (q *Question) Options() ([]Option, error) {
	bad := func(msg string) error { return &RequestError{Question: q.Name, Field: "criteria", Message: msg} }
	c := &q.Criteria
	switch q.Type {
	case Noul:
		empty := c.Kind == value.Null || c.Kind == value.Object && len(c.Obj) == 0 || c.Kind == value.Array && len(c.Arr) == 0
		if !empty {
			return nil, bad("a noul question takes no criteria (absent, null or empty), got " + c.Kind.String())
		}
		return noulOptions[:], nil
	case Choice:
		if c.Kind != value.Object {
			return nil, bad("a choice question needs an object {id: label}, got " + c.Kind.String())
		}
		if n := len(c.Obj); n < MinOptions || n > MaxOptions {
			return nil, bad(fmt.Sprintf("a choice question needs %d to %d options, got %d", MinOptions, MaxOptions, n))
		}
		opts := make([]Option, len(c.Obj))
		seen := make(map[string]bool, len(c.Obj))
		for i, m := range c.Obj {
			if seen[m.Key] {
				return nil, bad(fmt.Sprintf("duplicate option id %q", m.Key))
			}
			seen[m.Key] = true
			if m.Value.Kind != value.String {
				return nil, bad(fmt.Sprintf("option %q: the label must be a string, got %s", m.Key, m.Value.Kind))
			}
			if !validUTF8(m.Key) || !validUTF8(m.Value.Str) {
				return nil, bad(fmt.Sprintf("option %d is not valid UTF-8", i))
			}
			opts[i] = Option{ID: m.Key, Label: m.Value.Str}
		}
		return opts, nil
	case Score:
		if c.Kind != value.Array {
			return nil, bad("a score question needs a list of level labels, got " + c.Kind.String())
		}
		if n := len(c.Arr); n < MinOptions || n > MaxOptions {
			return nil, bad(fmt.Sprintf("a score question needs %d to %d levels, got %d", MinOptions, MaxOptions, n))
		}
		opts := make([]Option, len(c.Arr))
		for i, x := range c.Arr {
			if x.Kind != value.String {
				return nil, bad("level " + strconv.Itoa(i) + ": the label must be a string, got " + x.Kind.String())
			}
			if !validUTF8(x.Str) {
				return nil, bad("level " + strconv.Itoa(i) + " is not valid UTF-8")
			}
			opts[i] = Option{ID: i, Label: x.Str}
		}
		return opts, nil
	case "":
		return nil, &RequestError{Question: q.Name, Field: "type", Message: "missing (noul, choice or score)"}
	default:
		return nil, &RequestError{Question: q.Name, Field: "type", Message: fmt.Sprintf("unknown type %q (want noul, choice or score)", string(q.Type))}
	}
}

// Value returns the request as the value tree it travels as, every key
// order kept: what a client of the daemon sends ([Read] reads it back).
func (r *Request) Value() value.Value {
	qs := value.Value{Kind: value.Object, Obj: make([]value.Member, len(r.Questions))}
	for i, q := range r.Questions {
		o := value.NewObject(
			value.Member{Key: "type", Value: value.NewString(string(q.Type))},
			value.Member{Key: "instructions", Value: value.NewString(q.Instructions)},
		)
		if q.Criteria.Kind != value.Null {
			o.Obj = append(o.Obj, value.Member{Key: "criteria", Value: q.Criteria})
		}
		if q.Permute != nil {
			o.Obj = append(o.Obj, value.Member{Key: "permute", Value: value.NewBool(*q.Permute)})
		}
		qs.Obj[i] = value.Member{Key: q.Name, Value: o}
	}
	v := value.NewObject(value.Member{Key: "evidence", Value: r.Evidence}, value.Member{Key: "questions", Value: qs})
	if r.Permute {
		v.Obj = append(v.Obj, value.Member{Key: "permute", Value: value.NewBool(true)})
	}
	return v
}

// MarshalJSON writes the request as compact JSON, every key order kept
// ([Request.Value]).
func (r *Request) MarshalJSON() ([]byte, error) {
	v := r.Value()
	return v.MarshalJSON()
}

// MarshalMsgpack writes the request as msgpack, every key order kept
// ([Request.Value]): what the msgpack library calls by name when a request
// travels as params.
func (r *Request) MarshalMsgpack() ([]byte, error) {
	v := r.Value()
	return v.MarshalMsgpack()
}
