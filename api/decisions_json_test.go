package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
)

func TestWriteDecisionsJSON(t *testing.T) {
	ok := &api.Response{Answers: api.Answers{{Name: "q", Options: []any{"yes", "no"}, Probs: []float64{0.75, 0.25}, Answer: "yes"}}, Tokens: 12}
	refused := fmt.Errorf("decide_batch item 1: %w", &api.Error{Code: api.CodeBadRequest, Message: "questions: empty"})
	for _, tc := range []struct {
		name    string
		batch   bool
		resps   []*api.Response
		errs    []error
		want    any // the JSON written, decoded; nil: nothing written
		wantErr error
	}{
		{"one", false, []*api.Response{ok}, []error{nil}, ok, nil},
		{"one failed", false, []*api.Response{nil}, []error{refused}, nil, refused},
		{"batch", true, []*api.Response{ok, nil, ok}, []error{nil, refused, errors.New("plain")},
			[]any{ok, map[string]string{"error": "questions: empty"}, map[string]string{"error": "plain"}}, nil},
		{"empty batch", true, nil, nil, []any{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			err := api.WriteDecisionsJSON(&b, tc.batch, tc.resps, tc.errs)
			if err != tc.wantErr {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if tc.want == nil {
				if b.Len() != 0 {
					t.Fatalf("wrote %q, want nothing", b.String())
				}
				return
			}
			var got, want any
			wantJSON, _ := json.Marshal(tc.want)
			if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
				t.Fatalf("%q: %v", b.String(), err)
			}
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("wrote %s, want %s", b.String(), wantJSON)
			}
		})
	}
}
