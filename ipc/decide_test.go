package ipc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
)

// batchHandler answers decide_batch with the items it holds and echoes
// the params it got.
type batchHandler struct {
	items  []msgpack.RawMessage
	params chan msgpack.RawMessage
}

func (h *batchHandler) ServeIPC(ctx context.Context, req *Request) (any, error) {
	if req.Method != api.MethodDecideBatch {
		return nil, api.Errorf(api.CodeUnknownMethod, "no method %q", req.Method)
	}
	h.params <- append(msgpack.RawMessage(nil), req.Params...)
	if h.items == nil {
		return nil, api.Errorf(api.CodeInvalidParams, "decide_batch: no requests")
	}
	return api.BatchResult{Responses: h.items}, nil
}

// TestDecideBatch checks how Client.DecideBatch reads decide_batch's
// items: responses in order, a refused item as its *api.Error, an item
// that is neither failing the call with its index, and a refused call.
func TestDecideBatch(t *testing.T) {
	item := func(v any) msgpack.RawMessage {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := func(tokens int) msgpack.RawMessage {
		return item(api.Response{Answers: api.Answers{{Name: "q", Options: []any{"yes", "no"}, Probs: []float64{0.25, 0.75}, Answer: "no"}}, Tokens: tokens})
	}
	refused := item(api.BatchError{Error: api.Errorf(api.CodeInvalidParams, `question "a": instructions: missing`)})
	for _, tt := range []struct {
		name    string
		items   []msgpack.RawMessage
		tokens  []int  // per item; -1 where refused
		refusal string // the refused items' message
		err     string // the call's error
	}{
		{"all answered", []msgpack.RawMessage{ok(3), ok(5)}, []int{3, 5}, "", ""},
		{"one refused", []msgpack.RawMessage{ok(3), refused, ok(7)}, []int{3, -1, 7}, `question "a": instructions: missing`, ""},
		{"empty", []msgpack.RawMessage{}, []int{}, "", ""},
		{"undecodable item", []msgpack.RawMessage{ok(3), item("not a response")}, nil, "", "response 1: decode a decide_batch item"},
		{"call refused", nil, nil, "", "decide_batch: no requests"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &batchHandler{items: tt.items, params: make(chan msgpack.RawMessage, 1)}
			_, path := startServer(t, h, ServerOptions{})
			c := dial(t, path)
			resps, errs, err := c.DecideBatch(context.Background(), []map[string]int{{"n": 1}})
			if got := <-h.params; string(got) != string(item([]map[string]int{{"n": 1}})) {
				t.Errorf("params %x sent, want the encoded argument", got)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || resps != nil || errs != nil {
					t.Fatalf("got %v, %v, %v; want error %q", resps, errs, err, tt.err)
				}
				return
			}
			if err != nil || len(resps) != len(tt.tokens) || len(errs) != len(tt.tokens) {
				t.Fatalf("got %d responses, %d errors, %v; want %d items", len(resps), len(errs), err, len(tt.tokens))
			}
			for i, want := range tt.tokens {
				var perr *api.Error
				switch {
				case want < 0 && (resps[i] != nil || !errors.As(errs[i], &perr) || perr.Message != tt.refusal):
					t.Errorf("item %d: %v, %v; want the refusal %q", i, resps[i], errs[i], tt.refusal)
				case want >= 0 && (errs[i] != nil || resps[i] == nil || resps[i].Tokens != want || resps[i].Answers.Get("q").Probs[1] != 0.75):
					t.Errorf("item %d: %+v, %v; want tokens %d", i, resps[i], errs[i], want)
				}
			}
		})
	}
}

// TestDecide checks Client.Decide: the daemon's response decoded, its
// refusal as the *api.Error it sent.
func TestDecide(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		var p struct {
			Evidence int `json:"evidence"`
		}
		if err := Unmarshal(req.Params, &p); err != nil || req.Method != api.MethodDecide {
			return nil, api.Errorf(api.CodeInvalidParams, "want decide {evidence: int}")
		}
		if p.Evidence < 0 {
			return nil, api.Errorf(api.CodeInvalidParams, "negative evidence")
		}
		return api.Response{Answers: api.Answers{{Name: "q", Options: []any{"a"}, Probs: []float64{1}, Answer: "a"}}, Tokens: p.Evidence}, nil
	})
	_, path := startServer(t, h, ServerOptions{})
	c := dial(t, path)
	for _, tt := range []struct {
		evidence int
		err      string
	}{{7, ""}, {-1, "negative evidence"}} {
		resp, err := c.Decide(context.Background(), map[string]int{"evidence": tt.evidence})
		var perr *api.Error
		switch {
		case tt.err != "" && (resp != nil || !errors.As(err, &perr) || perr.Message != tt.err):
			t.Errorf("evidence %d: %+v, %v; want the refusal %q", tt.evidence, resp, err, tt.err)
		case tt.err == "" && (err != nil || resp.Tokens != tt.evidence || resp.Answers.Get("q") == nil):
			t.Errorf("evidence %d: %+v, %v", tt.evidence, resp, err)
		}
	}
}
