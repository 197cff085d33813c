package decide

import (
	"fmt"
	"math"

	"github.com/startlux/startlux/value"
)

// NonFiniteError is the error of a request whose model outputs are not
// finite numbers (NaN or infinite): the checkpoint is damaged (or the
// backend broken), not the request, and no probability is given for it.
type NonFiniteError struct {
	// Question names the first question whose outputs were not finite.
	Question string
	// What is "logits" (the model's outputs) or "probabilities" (what
	// became of them).
	What string
	// Value is the first non-finite value: "NaN", "+Inf" or "-Inf".
	Value string
}

// Error says which question, what and which value.
func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("question %q: model produces non-finite %s (%s); the checkpoint is damaged", e.Question, e.What, e.Value)
}

// nonFinite returns the first non-finite value of xs as "NaN", "+Inf" or
// "-Inf", or "" when every value is finite.
func nonFinite[F float32 | float64](xs []F) string {
	for _, x := range xs {
		f := float64(x)
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "+Inf"
		case math.IsInf(f, -1):
			return "-Inf"
		}
	}
	return ""
}

// checkLogits records on b, the first time, that question q's logits z are
// not finite; the request then fails with that error.
func (b *jobBase) checkLogits(q *Question, z []float32) {
	if b.bad != nil {
		return
	}
	if v := nonFinite(z); v != "" {
		b.bad = &NonFiniteError{Question: q.Name, What: "logits", Value: v}
	}
}

// checkAnswers returns a *NonFiniteError for the first answer with a
// non-finite probability, or nil.
func checkAnswers(as Answers) error {
	for _, a := range as {
		if v := nonFinite(a.Probs); v != "" {
			return &NonFiniteError{Question: a.Name, What: "probabilities", Value: v}
		}
	}
	return nil
}

// checkFinite returns the path of the first non-finite float in v, or nil.
func checkFinite(v *value.Value, path *pathNode) *pathNode {
	switch v.Kind {
	case value.Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return path
		}
	case value.Array:
		for i := range v.Arr {
			if p := checkFinite(&v.Arr[i], indexPath(path, i)); p != nil {
				return p
			}
		}
	case value.Object:
		for i := range v.Obj {
			if p := checkFinite(&v.Obj[i].Value, joinPath(path, v.Obj[i].Key)); p != nil {
				return p
			}
		}
	}
	return nil
}
