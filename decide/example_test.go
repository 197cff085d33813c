package decide_test

import (
	"fmt"

	"github.com/startlux/startlux/decide"
)

// A request keeps its key order and number forms: the evidence renders as
// the prompt shows it.
func ExampleParseJSON() {
	r, err := decide.ParseJSON([]byte(`{
		"evidence": {"zeta": 1.0, "alpha": [1e-5, 12345678901234567890123, -0, 1E16], "text": "tab\there"},
		"questions": {"stock": {"type": "noul", "instructions": "Is anything out of stock?"}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ev, _ := decide.RenderJSON(&r.Evidence)
	fmt.Println(ev)
	_, err = decide.ParseJSON([]byte(`{"evidence": 1, "questions": {"q": {"type": "choice", "instructions": "Which?", "criteria": {"a": "one"}}}}`))
	fmt.Println(err)
	// Output:
	// {"zeta": 1.0, "alpha": [1e-05, 12345678901234567890123, 0, 1e+16], "text": "tab\there"}
	// bad request: question "q": criteria: a choice question needs 2 to 1000 options, got 1
}
