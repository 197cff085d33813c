package decide

// Response is the answer to one request, as in-process callers see it:
// what travels (format.md "Response"; package api's Response) and the letter
// logits, which do not.
type Response struct {
	// Answers holds one answer per question, in the request's order.
	Answers Answers
	// Tokens counts the positions the model computed for this request,
	// padding excluded.
	Tokens int
	// CachedTokens counts the positions whose state came from snapshots
	// made before this request (the preamble, a kept evidence prefix).
	CachedTokens int
	// ElapsedMS is the wall time the request took, in milliseconds.
	ElapsedMS float64
}

// Answer is the answer to one question.
type Answer struct {
	// Name is the question's name (the key it is written under).
	Name string
	// Options are the option ids in order: strings, or ints for score.
	Options []any
	// Probs are the options' probabilities.
	Probs []float64
	// Answer is the id of the most probable option (the earliest on ties).
	Answer any
	// Expected is Σ i·p_i, for score questions only.
	Expected *float64
	// Scores, for in-process callers (evaluation and calibration; it is
	// never sent), are the letter logits the probabilities were read from:
	// Scores[s][j] is the logit of letter j in the row that shows the
	// options rotated by s (one row unless the question is permuted; see
	// [Config.Logits]). Nil for a question ranked in groups (more options
	// than wide_choice.group) and for pointer/1 checkpoints.
	Scores [][]float32
}

// Answers is the ordered map of answers by question name.
type Answers []Answer

// Get returns the answer to the named question, or nil.
func (as Answers) Get(name string) *Answer {
	for i := range as {
		if as[i].Name == name {
			return &as[i]
		}
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
