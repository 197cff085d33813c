package eval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/decide"
)

const (
	noulQ   = `"n": {"type": "noul", "instructions": "Is it?"}`
	choiceQ = `"c": {"type": "choice", "instructions": "Which?", "criteria": {"x": "X", "y": "Y", "z": "Z"}}`
	scoreQ  = `"s": {"type": "score", "instructions": "How much?", "criteria": ["low", "mid", "high"]}`
)

func line(labels string) string {
	return `{"request": {"evidence": {"a": 1}, "questions": {` + noulQ + `, ` + choiceQ + `, ` + scoreQ + `}}, "labels": ` + labels + `}`
}

func TestReadLabels(t *testing.T) {
	exs, err := Read(strings.NewReader(line(`{"n": "unknown", "c": "y", "s": 2}`) + "\n\n" + line(`{"c": "x"}`) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 2 || exs[0].Line != 1 || exs[1].Line != 3 {
		t.Fatalf("examples %+v", exs)
	}
	if fmt.Sprint(exs[0].Labels) != "[2 1 2]" || fmt.Sprint(exs[1].Labels) != "[-1 0 -1]" {
		t.Errorf("labels %v and %v, want [2 1 2] and [-1 0 -1]", exs[0].Labels, exs[1].Labels)
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not json", "{", "line 1: invalid JSON"},
		{"not an object", "[1]", "line 1: not a JSON object"},
		{"unknown field", `{"request": {}, "labels": {}, "weight": 1}`, `line 1: unknown field "weight"`},
		{"no labels", `{"request": {"evidence": 1, "questions": {` + noulQ + `}}}`, "line 1: labels is missing"},
		{"no request", `{"labels": {"n": "yes"}}`, "line 1: request is missing"},
		{"bad request", `{"request": {"evidence": 1, "questions": {}}, "labels": {"n": "yes"}}`, "line 1: request: bad request: questions: no questions"},
		{"empty labels", line(`{}`), "line 1: labels: empty"},
		{"duplicate label", line(`{"n": "yes", "n": "no"}`), `line 1: labels: duplicate key "n"`},
		{"label of no question", line(`{"q": "yes"}`), "line 1: labels.q: the request has no such question"},
		{"bad noul label", line(`{"n": "maybe"}`), `labels.n: "maybe" is not an option of the question (options [yes no unknown])`},
		{"bad choice label", line(`{"c": "X"}`), `labels.c: "X" is not an option`},
		{"choice label a number", line(`{"c": 1}`), `labels.c: a choice label is an option id (a string), got 1`},
		{"score label too big", line(`{"s": 3}`), "labels.s: a score label is a level index 0..2, got 3"},
		{"score label negative", line(`{"s": -1}`), "labels.s: a score label is a level index 0..2, got -1"},
		{"score label fraction", line(`{"s": 1.5}`), "labels.s: a score label is a level index 0..2, got 1.5"},
		{"score label a string", line(`{"s": "high"}`), `labels.s: a score label is the level's index, got "high"`},
		{"second line", line(`{"n": "yes"}`) + "\n" + line(`{"n": 1}`), "line 2: labels.n"},
		{"no lines", "\n\n", "no examples"},
		{"trailing data", line(`{"n": "yes"}`) + ` 1`, "line 1: invalid JSON: data after the object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestReadDemoTasks reads the demo checkpoint's labelled set: 3,000 lines,
// one question each, 1,394 noul, 526 choice and 1,080 score (its README).
func TestReadDemoTasks(t *testing.T) {
	exs, err := ReadFile(filepath.Join("..", "testdata", "eval", "demo-tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	count := map[decide.QuestionType]int{}
	for _, ex := range exs {
		for i, l := range ex.Labels {
			if l >= 0 {
				count[ex.Request.Questions[i].Type]++
			}
		}
	}
	if len(exs) != 3000 || count[decide.Noul] != 1394 || count[decide.Choice] != 526 || count[decide.Score] != 1080 {
		t.Errorf("%d examples, %v", len(exs), count)
	}
}

// fakeDecider answers every question with fixed probabilities (more on the
// first option) and records what it was sent.
type fakeDecider struct {
	calls   int
	permute []bool // per question sent, in order
	fail    string // a question name to refuse
}

func (f *fakeDecider) DecideBatch(_ context.Context, reqs []*decide.Request) ([]*decide.Response, []error) {
	f.calls++
	resps := make([]*decide.Response, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		resp := &decide.Response{Tokens: 7, CachedTokens: 3}
		for qi := range r.Questions {
			q := &r.Questions[qi]
			if q.Name == f.fail {
				errs[i] = errors.New("refused")
			}
			f.permute = append(f.permute, r.Permuted(q))
			opts, _ := q.Options()
			p := make([]float64, len(opts))
			for j := range p {
				p[j] = 1 / float64(len(p)+1)
			}
			p[0] *= 2
			resp.Answers = append(resp.Answers, decide.Answer{Name: q.Name, Probs: p})
		}
		resps[i] = resp
	}
	return resps, errs
}

func TestRun(t *testing.T) {
	var data strings.Builder
	for i := range 5 {
		data.WriteString(line(fmt.Sprintf(`{"n": "yes", "s": %d}`, i%3)) + "\n")
	}
	exs, err := Read(strings.NewReader(data.String()))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDecider{}
	var progress []int
	res, err := Run(context.Background(), f, exs, RunOptions{Batch: 2, Progress: func(done, total int) { progress = append(progress, done, total) }})
	if err != nil {
		t.Fatal(err)
	}
	recs := res.Records
	if res.Tokens != 5*7 || res.CachedTokens != 5*3 {
		t.Errorf("tokens %d cached %d, want the responses' sums 35 and 15", res.Tokens, res.CachedTokens)
	}
	if f.calls != 3 || fmt.Sprint(progress) != "[2 5 4 5 5 5]" {
		t.Errorf("%d calls, progress %v", f.calls, progress)
	}
	if len(recs) != 10 || recs[0].Type != decide.Noul || recs[1].Type != decide.Score || recs[3].Label != 1 || recs[9].Line != 5 {
		t.Errorf("records %+v", recs)
	}
	// Accuracy: every noul right (yes is first), score right when the label is 0 (lines 1 and 4).
	if rep := Compute(recs); rep.Types[decide.Noul].Accuracy != 1 || !near(rep.Types[decide.Score].Accuracy, 0.4) {
		t.Errorf("accuracy %v %v", rep.Types[decide.Noul].Accuracy, rep.Types[decide.Score].Accuracy)
	}

	f = &fakeDecider{}
	if _, err := Run(context.Background(), f, exs[:1], RunOptions{PermuteQuestion: func(ex, q int) bool { return q == 1 }}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.permute) != "[false true false]" || exs[0].Request.Questions[1].Permute != nil {
		t.Errorf("permuted %v; the example's own request must stay as read", f.permute)
	}
	f = &fakeDecider{}
	if _, err := Run(context.Background(), f, exs[:1], RunOptions{Permute: true}); err != nil || fmt.Sprint(f.permute) != "[true true true]" || exs[0].Request.Permute {
		t.Errorf("permute all: %v %v", f.permute, err)
	}

	f = &fakeDecider{fail: "c"}
	if _, err := Run(context.Background(), f, exs[2:], RunOptions{}); err == nil || !strings.Contains(err.Error(), "line 3: refused") {
		t.Errorf("a refused request: %v", err)
	}
}
