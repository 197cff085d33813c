package decide

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/startlux/startlux/value"
)

// TestParseDocument checks which documents are read as a batch, which
// requests keep their own error and which errors are the document's.
func TestParseDocument(t *testing.T) {
	good := `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": "x"}}}`
	bad := `{"evidence": 2, "questions": {"a": {"type": "noul"}}}`
	for _, tt := range []struct {
		name  string
		doc   string
		batch bool
		read  []bool // per request: read without error
		err   string // the document's error
	}{
		{"one request", good, false, []bool{true}, ""},
		{"one bad request", bad, false, nil, `question "a": instructions: missing`},
		{"array", " \n\t[" + good + ", " + bad + ", " + good + "]", true, []bool{true, false, true}, ""},
		{"empty array", "[]", true, []bool{}, ""},
		{"unreadable array", `[{"evidence": {"k": 1, "k": 2}}]`, true, nil, `request 0: evidence: duplicate key "k"`},
		{"requests object is one request", `{"requests": [` + good + `]}`, false, nil, "bad request"},
		{"not JSON", `nope`, false, nil, "bad request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsBatchJSON([]byte(tt.doc)); got != tt.batch {
				t.Errorf("IsBatchJSON = %v, want %v", got, tt.batch)
			}
			d, err := ParseDocument([]byte(tt.doc))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Batch != tt.batch || len(d.Requests) != len(tt.read) || len(d.Errs) != len(tt.read) {
				t.Fatalf("batch %v, %d requests, %d errors; want %v, %d", d.Batch, len(d.Requests), len(d.Errs), tt.batch, len(tt.read))
			}
			for i, ok := range tt.read {
				if (d.Requests[i] != nil) != ok || (d.Errs[i] == nil) != ok {
					t.Errorf("request %d: %v, error %v; want read %v", i, d.Requests[i], d.Errs[i], ok)
				}
			}
		})
	}
}

// TestDecideDocument answers a batch with a bad request and a request the
// engine refuses on the demo model: the others get what Decide gives them
// one by one, and each failed one its own error.
func TestDecideDocument(t *testing.T) {
	e := openDemo(t, Options{})
	doc := `[{"evidence": {"rows": [1, 2]}, "questions": {"a": {"type": "noul", "instructions": "Is there a row 2?"}}},
		{"evidence": 1, "questions": {"a": {"type": "noul"}}},
		{"evidence": "x", "questions": {"c": {"type": "choice", "instructions": "Which?", "criteria": {"p": "one", "q": "two"}}}},
		{"evidence": "` + strings.Repeat("word ", 40000) + `", "questions": {"a": {"type": "noul", "instructions": "Long?"}}}]`
	d, err := ParseDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	resps, errs := e.DecideDocument(context.Background(), d)
	if len(resps) != 4 || len(errs) != 4 {
		t.Fatalf("%d responses, %d errors for 4 requests", len(resps), len(errs))
	}
	if errs[1] != d.Errs[1] || resps[1] != nil {
		t.Errorf("the unread request: %v, %v; want its read error %v", resps[1], errs[1], d.Errs[1])
	}
	if errs[3] == nil || resps[3] != nil {
		t.Errorf("the over-long request: %v, %v; want a refusal", resps[3], errs[3])
	}
	for _, i := range []int{0, 2} {
		want, err := e.Decide(context.Background(), d.Requests[i])
		if err != nil {
			t.Fatal(err)
		}
		if errs[i] != nil || len(resps[i].Answers) != len(want.Answers) {
			t.Fatalf("request %d: %+v, %v; want %+v", i, resps[i], errs[i], want)
		}
		for k, a := range want.Answers {
			for j, p := range a.Probs {
				if got := resps[i].Answers[k].Probs[j]; math.Abs(got-p) > 1e-5 {
					t.Errorf("request %d: %s p[%d] = %v, one by one %v", i, a.Name, j, got, p)
				}
			}
		}
	}
}

// TestDocumentMsgpack converts documents for the daemon: what converts
// reads back as the same tree, key order kept, without its requests being
// read; bad JSON fails as ParseDocument fails on it; an integer msgpack
// cannot hold is refused by name.
func TestDocumentMsgpack(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		err       string // "": converts; "parse": ParseDocument's error
	}{
		{"one request", `{"evidence": {"z": 1, "a": [1.5, "x"]}, "questions": {"q": {"type": "noul", "instructions": "x"}}}`, ""},
		{"a bad request is the daemon's to refuse", `{"evidence": 1, "questions": {"a": {"type": "noul"}}}`, ""},
		{"batch", `[{"evidence": 1}, {"evidence": 2}]`, ""},
		{"bad JSON", `{"evidence": 1, "questions": {`, "parse"},
		{"bad JSON in a batch", `[{"evidence": {"k": 1, "k": 2}}]`, "parse"},
		{"integer beyond 64 bits", `{"evidence": {"id": 123456789012345678901234567890}}`, "the request cannot go to the daemon: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := DocumentMsgpack([]byte(tt.doc))
			if tt.err == "parse" {
				_, perr := ParseDocument([]byte(tt.doc))
				if err == nil || perr == nil || err.Error() != perr.Error() {
					t.Fatalf("error %v, want ParseDocument's %v", err, perr)
				}
				return
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "123456789012345678901234567890") {
					t.Fatalf("error %v, want %q naming the integer", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := value.ParseMsgpack(b)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := value.ParseJSON([]byte(tt.doc))
			gj, _ := value.AppendJSON(nil, &got, value.Compact)
			wj, _ := value.AppendJSON(nil, &want, value.Compact)
			if string(gj) != string(wj) {
				t.Errorf("read back %s, want %s", gj, wj)
			}
		})
	}
}
