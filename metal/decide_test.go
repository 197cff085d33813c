package metal_test

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/internal/testenv"
	"github.com/startlux/startlux/metal"
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
	be, err := metal.OpenUnderTest()
	if errors.Is(err, metal.ErrNoCompiler) {
		testenv.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
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
