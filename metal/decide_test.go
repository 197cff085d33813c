package metal_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/tensor"
)

// decideCases are the decide-demo.json cases run through the emulated
// backend (the GPU with -tags mactest): case 0 asks a noul, a score and a second noul question; case 40
// a 32-option question (the wide-choice rounds) and a noul. Each request
// takes up to a minute in the emulator; the decide package's own tests run
// all 42 on the CPU backend. STARTLUX_METAL_FULL=1 runs all 42 here too.
var decideCases = []int{0, 40}

// TestDecideDemo runs whole decisions of the embedded demo checkpoint on the
// emulated Metal backend and holds every probability to decide-demo.json
// within 1e-3.
func TestDecideDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("whole decisions through the emulator")
	}
	goldenCases, err := goldens.DecideDemo("../testdata")
	if err != nil {
		t.Fatal(err)
	}
	be := underTest(t)
	e, err := decide.Open("../testdata/demo-decision", be, decide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cases := decideCases
	if os.Getenv("STARTLUX_METAL_FULL") != "" {
		cases = nil
		for i := range goldenCases {
			cases = append(cases, i)
		}
	}
	for _, ci := range cases {
		c := goldenCases[ci]
		req, err := decide.ParseJSON(c.Request)
		if err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
		resp, err := e.Decide(context.Background(), req)
		if err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
		if len(resp.Answers) != len(c.Answers) {
			t.Fatalf("case %d: %d answers, want %d", ci, len(resp.Answers), len(c.Answers))
		}
		for name, want := range c.Answers {
			a := resp.Answers.Get(name)
			if a == nil || len(a.Probs) != len(want.Probs) {
				t.Fatalf("case %d %s: answer %+v, want %d probabilities", ci, name, a, len(want.Probs))
			}
			for i, p := range want.Probs {
				if d := math.Abs(a.Probs[i] - p); d > 1e-3 {
					t.Errorf("case %d %s: p[%d] = %.6f, want %.6f", ci, name, i, a.Probs[i], p)
				}
			}
		}
	}
}

// TestPoolBoundDecide answers requests of two shapes (pages of 2 and 8 rows,
// with one and two questions) on the backend under test with its pool
// of freed buffers bounded to 256 KiB: after each the pool holds no more,
// it did keep buffers, and the probabilities are the CPU backend's within
// 1e-3.
func TestPoolBoundDecide(t *testing.T) {
	if testing.Short() {
		t.Skip("whole decisions through the emulator")
	}
	be := underTest(t)
	const limit = 256 << 10
	pool := be.(tensor.Pooler)
	pool.SetPoolLimit(limit)
	e, err := decide.Open("../testdata/demo-decision", be, decide.Options{CacheLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := decide.Open("../testdata/demo-decision", ref, decide.Options{CacheLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	var kept int64
	for i, rows := range []int{2, 8} {
		var items []string
		for r := range rows {
			items = append(items, fmt.Sprintf(`{"item": "part %d", "qty": %d}`, r, (r*5+i)%7))
		}
		qs := []string{
			`"empty": {"type": "noul", "instructions": "Is any part out of stock?"}`,
			`"level": {"type": "score", "instructions": "How full is the page?", "criteria": ["empty", "some", "full"]}`,
			`"first": {"type": "choice", "instructions": "Which part comes first?", "criteria": {"a": "part 0", "b": "part 1"}}`,
		}
		js := `{"evidence": {"page": [` + strings.Join(items, ", ") + `]}, "questions": {` + strings.Join(qs[:1+i], ", ") + `}}`
		req, err := decide.ParseJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Decide(context.Background(), req)
		if err != nil {
			t.Fatalf("page of %d rows: %v", rows, err)
		}
		held, _ := pool.PoolStats()
		if held > limit {
			t.Fatalf("page of %d rows: the pool holds %d bytes, limit %d", rows, held, limit)
		}
		kept = max(kept, held)
		ref, err := want.Decide(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for k, a := range got.Answers {
			for j, p := range ref.Answers[k].Probs {
				if d := math.Abs(a.Probs[j] - p); d > 1e-3 {
					t.Errorf("page of %d rows, %s: p[%d] = %.6f, the CPU backend's %.6f", rows, a.Name, j, a.Probs[j], p)
				}
			}
		}
	}
	if kept == 0 {
		t.Error("the pool never kept a buffer")
	}
	t.Logf("the pool held up to %d of %d bytes", kept, limit)
}
