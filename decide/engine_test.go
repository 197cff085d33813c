package decide

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/tokenizer"
)

func demoDir() string { return filepath.Join(repoTestdata, "demo-decision") }

func openDemo(t testing.TB, opts Options) *Engine {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(demoDir(), be, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestRenderDemoIDs(t *testing.T) {
	cfg := demoConfig(t)
	tok, err := tokenizer.Load(filepath.Join(demoDir(), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range loadRenderCases(t) {
		got := tok.Encode(rowText(t, cfg, &c.evidence, &c.question))
		if fmt.Sprint(got) != fmt.Sprint(c.ids) {
			t.Errorf("case %d: ids differ\n got %v\nwant %v", i, got, c.ids)
		}
	}
}

// relErr is ‖a−b‖/‖b‖ over the whole of b.
func relErr(a, b []float32) float64 { return goldens.MaxRel(a, b, len(b)) }

// TestDecideDemo runs the 42 golden requests and checks every row's ids and
// letter logits and every final probability.
func TestDecideDemo(t *testing.T) {
	e := openDemo(t, Options{})
	cases := loadDecideCases(t)
	type rowKey struct {
		r *Request
		q string
	}
	var mu sync.Mutex
	seen := map[rowKey][][]int32{}
	logits := map[rowKey][][]float32{}
	jevfmtOf(e).trace = func(r *Request, q *Question, ids []int32, z []float32) {
		mu.Lock()
		defer mu.Unlock()
		k := rowKey{r, q.Name}
		seen[k] = append(seen[k], ids)
		logits[k] = append(logits[k], append([]float32(nil), z...))
	}
	reqs := make([]*Request, len(cases))
	for i := range cases {
		reqs[i] = cases[i].req
	}
	// Half one by one, half as a batch.
	resps := make([]*Response, len(reqs))
	for i := 0; i < len(reqs)/2; i++ {
		r, err := e.Decide(context.Background(), reqs[i])
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		resps[i] = r
	}
	rs, errs := e.DecideBatch(context.Background(), reqs[len(reqs)/2:])
	for i := range rs {
		if errs[i] != nil {
			t.Fatalf("case %d: %v", len(reqs)/2+i, errs[i])
		}
		resps[len(reqs)/2+i] = rs[i]
	}
	worstP, worstZ := 0.0, 0.0
	for ci, c := range cases {
		for _, q := range c.req.Questions {
			ga := c.answers[q.Name]
			k := rowKey{c.req, q.Name}
			if len(seen[k]) != len(ga.rows) {
				t.Fatalf("case %d %s: %d rows, goldens have %d", ci, q.Name, len(seen[k]), len(ga.rows))
			}
			for ri, gr := range ga.rows {
				// Rows of one stage may run in any order; match by ids.
				found := false
				for si, ids := range seen[k] {
					if fmt.Sprint(ids) == fmt.Sprint(gr.ids) {
						found = true
						rel := relErr(logits[k][si][:len(gr.logits)], gr.logits)
						worstZ = math.Max(worstZ, rel)
						if rel > 1e-4 {
							t.Errorf("case %d %s row %d: letter logits rel err %.3g", ci, q.Name, ri, rel)
						}
					}
				}
				if !found {
					t.Errorf("case %d %s row %d: no row ran with the golden ids", ci, q.Name, ri)
				}
			}
			a := resps[ci].Answers.Get(q.Name)
			if a == nil {
				t.Fatalf("case %d: no answer %s", ci, q.Name)
			}
			for j := range ga.probs {
				d := math.Abs(a.Probs[j] - ga.probs[j])
				worstP = math.Max(worstP, d)
				if d > 1e-4 {
					t.Errorf("case %d %s: p[%d] = %v, want %v", ci, q.Name, j, a.Probs[j], ga.probs[j])
				}
			}
		}
	}
	t.Logf("worst |Δp| %.3g, worst letter-logit rel err %.3g", worstP, worstZ)
}

// jevfmtOf returns the family of a jevfmt/1 engine.
func jevfmtOf(e *Engine) *jevfmtFamily { return e.fam.(*jevfmtFamily) }

// pointerOf returns the family of a pointer/1 engine.
func pointerOf(e *Engine) *pointerFamily { return e.fam.(*pointerFamily) }
