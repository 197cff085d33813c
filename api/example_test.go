package api_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/startlux/startlux/api"
)

// A decision request as a Go client builds it: questions and choices are
// ordered maps, sent in the order written, and evidence that must keep its
// key order is a struct (or an ordered value tree).
func ExampleRequest() {
	type shelf struct {
		Store string   `json:"store"`
		Items []string `json:"items"`
	}
	r := api.Request{
		Evidence: shelf{Store: "north", Items: []string{"stapler", "lamp"}},
		Questions: api.Questions{
			{Name: "stock", Type: api.TypeNoul, Instructions: "Is anything out of stock?"},
			{Name: "aisle", Type: api.TypeChoice, Instructions: "Which aisle?",
				Criteria: api.Choices{{ID: "b", Label: "office"}, {ID: "a", Label: "home"}}},
		},
	}
	js, err := json.Marshal(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(js))
	// Output:
	// {"evidence":{"store":"north","items":["stapler","lamp"]},"questions":{"stock":{"type":"noul","instructions":"Is anything out of stock?"},"aisle":{"type":"choice","instructions":"Which aisle?","criteria":{"b":"office","a":"home"}}}}
}

// A response's answers come back in the request's order and are found by
// question name.
func ExampleAnswers_Get() {
	var resp api.Response
	err := json.Unmarshal([]byte(`{"answers":{"stock":{"options":["yes","no","unknown"],"probs":[0.7,0.2,0.1],"answer":"yes"},`+
		`"aisle":{"options":["b","a"],"probs":[0.4,0.6],"answer":"a"}},"tokens":120,"cached_tokens":96,"elapsed_ms":41.5}`), &resp)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range resp.Answers {
		fmt.Println(a.Name, a.Answer)
	}
	fmt.Println(resp.Answers.Get("aisle").Probs)
	// Output:
	// stock yes
	// aisle a
	// [0.4 0.6]
}

// An error from the daemon carries a code to branch on; ErrorCode finds it
// through wrapping, and calls it internal for any other error.
func ExampleErrorCode() {
	err := fmt.Errorf("decide: %w", api.Errorf(api.CodeInvalidParams, "question %q: no criteria", "aisle"))
	fmt.Println(api.ErrorCode(err), api.ErrorMessage(err))
	fmt.Println(api.ErrorCode(errors.New("disk full")))
	// Output:
	// invalid_params question "aisle": no criteria
	// internal
}
