package api

// This file holds a decision request and its response as they travel
// (format.md "Request" and "Response").

// The question types.
const (
	TypeNoul   = "noul"   // yes / no / the evidence does not say; no criteria
	TypeChoice = "choice" // criteria: an object {id: label}, as [Choices]
	TypeScore  = "score"  // criteria: a list of level labels; option ids 0..n-1
)

// Request is one decision request: the params of decide, and one item of
// decide_batch's.
type Request struct {
	// Evidence is any value; it is rendered into the prompt with its
	// object keys in the order they are encoded, so pass a value that keeps
	// an order (a struct, a [msgpack.RawMessage], an ordered value tree)
	// where the order matters.
	Evidence any `json:"evidence"`
	// Questions are the questions, by name, in order.
	Questions Questions `json:"questions"`
	// Permute asks for every question to be read over all cyclic shifts of
	// its options (unless the question says otherwise).
	Permute bool `json:"permute,omitempty"`
}

// Question is one question of a [Request].
type Question struct {
	// Name is the key the question is written under; its answer comes
	// back under the same key.
	Name string `json:"-"`
	// Type is [TypeNoul], [TypeChoice] or [TypeScore].
	Type string `json:"type"`
	// Instructions is the question, as the prompt shows it.
	Instructions string `json:"instructions"`
	// Criteria are the options: nil for noul, [Choices] for choice, a
	// []string of level labels for score.
	Criteria any `json:"criteria,omitempty"`
	// Permute, when set, overrides the request's Permute for this
	// question.
	Permute *bool `json:"permute,omitempty"`
}

// Questions is the ordered map of questions by name.
type Questions []Question

// Choice is one option of a choice question.
type Choice struct {
	// ID is the option's id, the key it is written under.
	ID string
	// Label is the option's text in the prompt.
	Label string
}

// Choices is a choice question's criteria: the ordered map {id: label}.
type Choices []Choice

// Response is the answer to one decision request.
type Response struct {
	// Answers holds one answer per question, in the request's order.
	Answers Answers `json:"answers"`
	// Tokens counts the positions the model computed for this request,
	// padding excluded.
	Tokens int `json:"tokens"`
	// CachedTokens counts the positions whose state came from snapshots
	// made before this request (the preamble, a kept evidence prefix).
	CachedTokens int `json:"cached_tokens"`
	// ElapsedMS is the wall time the request took, in milliseconds.
	ElapsedMS float64 `json:"elapsed_ms"`
}

// Answer is the answer to one question.
type Answer struct {
	// Name is the question's name (the key it is written under).
	Name string `json:"-"`
	// Options are the option ids in order: strings, or integers for score.
	Options []any `json:"options"`
	// Probs are the options' probabilities.
	Probs []float64 `json:"probs"`
	// Answer is the id of the most probable option (the earliest on ties).
	Answer any `json:"answer"`
	// Expected is Σ i·p_i, for score questions only.
	Expected *float64 `json:"expected,omitempty"`
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
