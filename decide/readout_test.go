package decide

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/startlux/startlux/value"
)

// decideCase is one case of decide-demo.json.
type decideCase struct {
	req     *Request
	answers map[string]goldenAnswer
}

type goldenAnswer struct {
	options []string // ids as rendered by json (strings quoted, ints bare)
	probs   []float64
	rows    []goldenRow
}

type goldenRow struct {
	labels []string
	ids    []int32
	logits []float32
}

func numOf(t testing.TB, v *value.Value) float64 {
	t.Helper()
	switch v.Kind {
	case value.Int:
		f, err := strconv.ParseFloat(v.Int, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	case value.Float:
		return v.Float
	}
	t.Fatalf("not a number: %v", v.Kind)
	return 0
}

func loadDecideCases(t testing.TB) []decideCase {
	t.Helper()
	root, err := value.ParseJSON(readFile(t, filepath.Join(repoTestdata, "goldens", "decide-demo.json")))
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := root.Get("cases")
	var out []decideCase
	for i := range cases.Arr {
		c := &cases.Arr[i]
		rv, _ := c.Get("request")
		req, err := requestFromValue(rv)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		dc := decideCase{req: req, answers: map[string]goldenAnswer{}}
		av, _ := c.Get("answers")
		for _, m := range av.Obj {
			var ga goldenAnswer
			ov, _ := m.Value.Get("options")
			for _, o := range ov.Arr {
				b, _ := o.MarshalJSON()
				ga.options = append(ga.options, string(b))
			}
			pv, _ := m.Value.Get("probs")
			for j := range pv.Arr {
				ga.probs = append(ga.probs, numOf(t, &pv.Arr[j]))
			}
			rowsv, _ := m.Value.Get("rows")
			for _, r := range rowsv.Arr {
				var gr goldenRow
				lv, _ := r.Get("labels")
				for _, l := range lv.Arr {
					gr.labels = append(gr.labels, l.Str)
				}
				iv, _ := r.Get("ids")
				for j := range iv.Arr {
					gr.ids = append(gr.ids, int32(numOf(t, &iv.Arr[j])))
				}
				zv, _ := r.Get("letter_logits")
				for j := range zv.Arr {
					gr.logits = append(gr.logits, float32(numOf(t, &zv.Arr[j])))
				}
				ga.rows = append(ga.rows, gr)
			}
			dc.answers[m.Key] = ga
		}
		out = append(out, dc)
	}
	if len(out) != 42 {
		t.Fatalf("decide-demo.json has %d cases, want 42", len(out))
	}
	return out
}

// TestReadoutFromGoldenLogits feeds the goldens' letter logits through the
// temperature and wide-choice rule and checks the final probabilities and
// the rows each stage asks for (labels, in order).
func TestReadoutFromGoldenLogits(t *testing.T) {
	cfg := demoConfig(t)
	wide := 0
	for ci, c := range loadDecideCases(t) {
		for _, q := range c.req.Questions {
			ga := c.answers[q.Name]
			opts, err := q.Options()
			if err != nil {
				t.Fatal(err)
			}
			r := newRanking(len(opts), cfg.WideChoice)
			next := 0
			for !r.done() {
				var ps [][]float64
				for _, g := range r.groups {
					if next >= len(ga.rows) {
						t.Fatalf("case %d %s: more rows than the goldens", ci, q.Name)
					}
					gr := ga.rows[next]
					next++
					if len(g) != len(gr.labels) {
						t.Fatalf("case %d %s: row %d has %d options, want %d", ci, q.Name, next-1, len(g), len(gr.labels))
					}
					for j, o := range g {
						if opts[o].Label != gr.labels[j] {
							t.Fatalf("case %d %s: row %d label %d = %q, want %q", ci, q.Name, next-1, j, opts[o].Label, gr.labels[j])
						}
					}
					ps = append(ps, Softmax(cfg.Logits(q.Type, [][]float32{gr.logits}), cfg.TemperatureByType[string(q.Type)]))
				}
				r.advance(ps)
			}
			if next != len(ga.rows) {
				t.Errorf("case %d %s: used %d rows, goldens have %d", ci, q.Name, next, len(ga.rows))
			}
			if len(ga.rows) > 1 {
				wide++
			}
			a := makeAnswer(&q, opts, r.probs)
			for j := range a.Probs {
				if d := math.Abs(a.Probs[j] - ga.probs[j]); d > 1e-6 {
					t.Errorf("case %d %s: p[%d] = %v, want %v", ci, q.Name, j, a.Probs[j], ga.probs[j])
				}
				b, _ := value.Value{Kind: kindOfID(a.Options[j]), Str: strID(a.Options[j]), Int: intID(a.Options[j])}.MarshalJSON()
				if string(b) != ga.options[j] {
					t.Errorf("case %d %s: option %d = %s, want %s", ci, q.Name, j, b, ga.options[j])
				}
			}
		}
	}
	if wide == 0 {
		t.Error("no wide question in the goldens was exercised")
	}
}

func kindOfID(id any) value.Kind {
	if _, ok := id.(int); ok {
		return value.Int
	}
	return value.String
}

func strID(id any) string { s, _ := id.(string); return s }

func intID(id any) string {
	if i, ok := id.(int); ok {
		return strconv.Itoa(i)
	}
	return ""
}

func TestRankingTiesAndShapes(t *testing.T) {
	w := WideChoice{Group: 4, Keep: 2, Residual: 0.1}
	r := newRanking(10, w)
	// 10 options in groups of 4 → k = 3, sizes 4, 3, 3.
	if len(r.groups) != 3 || len(r.groups[0]) != 4 || len(r.groups[1]) != 3 || len(r.groups[2]) != 3 {
		t.Fatalf("groups %v", r.groups)
	}
	// Equal probabilities in group 0: the earlier options survive.
	r.advance([][]float64{{0.25, 0.25, 0.25, 0.25}, {0.2, 0.5, 0.3}, {0.6, 0.2, 0.2}})
	want := []int{0, 1, 5, 6, 7, 8}
	if len(r.groups) != 2 || len(r.groups[0])+len(r.groups[1]) != 6 {
		t.Fatalf("second stage %v", r.groups)
	}
	got := append(append([]int{}, r.groups[0]...), r.groups[1]...)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("survivors %v, want %v", got, want)
		}
	}
	// 6 survivors in groups of 3 → keep 2 each → 4 → final row.
	r.advance([][]float64{{0.5, 0.3, 0.2}, {0.1, 0.1, 0.8}})
	if !r.final || len(r.groups[0]) != 4 {
		t.Fatalf("final stage %v", r.groups)
	}
	r.advance([][]float64{{0.4, 0.3, 0.2, 0.1}})
	var sum float64
	for _, p := range r.probs {
		sum += p
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("probabilities sum to %v", sum)
	}
	// Stage 2 groups {0,1,5} and {6,7,8}: 5 goes, and 7 (tied with 6, which
	// is earlier). Survivors 0,1,6,8 share 0.9.
	if math.Abs(r.probs[0]-0.9*0.4) > 1e-12 || math.Abs(r.probs[8]-0.9*0.1) > 1e-12 {
		t.Errorf("survivor probabilities %v", r.probs)
	}
	elim := map[int]float64{2: 0.25, 3: 0.25, 4: 0.2, 9: 0.2, 5: 0.2, 7: 0.1}
	var tot float64
	for _, e := range elim {
		tot += e
	}
	for o, e := range elim {
		if math.Abs(r.probs[o]-0.1*e/tot) > 1e-12 {
			t.Errorf("eliminated %d: %v, want %v", o, r.probs[o], 0.1*e/tot)
		}
	}
}
