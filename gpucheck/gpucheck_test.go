package gpucheck

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

func cpuBackend(t *testing.T) tensor.Backend {
	t.Helper()
	be, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestRowsAreGoldens: the rows the check runs are the demo tokenizer's
// golden rows (render-demo.json cases 8, 7 and 24), token for token.
func TestRowsAreGoldens(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "goldens", "render-demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			IDs []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	rows, letters, err := demoRows(startlux.DemoModel())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []int{8, 7, 24} {
		if !slices.Equal(rows[i], g.Cases[c].IDs) {
			t.Errorf("row %d: %d ids, golden case %d has %d:\n got %v\nwant %v", i, len(rows[i]), c, len(g.Cases[c].IDs), rows[i], g.Cases[c].IDs)
		}
	}
	if !slices.Equal(letters, []int{32, 33, 34}) {
		t.Errorf("letters %v", letters)
	}
	if n := commonPrefix(rows); n < 20 || n >= len(rows[1]) {
		t.Errorf("shared prefix of %d tokens", n)
	}
}

// TestModelCheckCPU: the model pass of the CPU backend against itself
// agrees exactly; against a backend whose attention is off, it does not.
func TestModelCheckCPU(t *testing.T) {
	ctx := context.Background()
	ref := cpuBackend(t)
	if m := checkModel(ctx, cpuBackend(t), ref); !m.OK() || m.MaxRel != 0 || m.Rows != 3 {
		t.Errorf("cpu against cpu: %+v", m)
	}
	m := checkModel(ctx, skewedAttention{cpuBackend(t)}, ref)
	if m.OK() || m.Err != nil || m.MaxRel < ModelTol {
		t.Errorf("skewed attention: %+v", m)
	}
	r := Result{Backend: "skewed", Model: m}
	if !strings.HasPrefix(r.Note(), "Metal disabled: the demo model's letter logits differ from the CPU's by ") || !strings.Contains(r.Note(), " at row ") {
		t.Errorf("note %q", r.Note())
	}
	if err := r.Err(); err == nil || !strings.HasPrefix(err.Error(), "skewed self-check failed: the demo model's letter logits differ") {
		t.Errorf("err %v", err)
	}
}

// skewedAttention is a backend whose attention output is 1% too large: a
// fault small per element that the letter logits still show.
type skewedAttention struct{ tensor.Backend }

func (b skewedAttention) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	b.Backend.Attention(out, q, k, v, a)
	n := out.Len()
	x := make([]float32, n)
	if err := b.Backend.Read(context.Background(), out, 0, x); err != nil {
		panic(err)
	}
	for i := range x {
		x[i] *= 1.01
	}
	b.Backend.Write(out, 0, x)
}

// TestRun: the emulated Metal backend passes the check. Under the
// emulator the demo model's pass takes 30 s or more on a shared 2-core
// machine (two passes of a few kernels that are slow to emulate), so it
// runs only with STARTLUX_METAL_FULL=1; TestModelCheckCPU covers its
// comparison, and with -tags mactest (./build.sh mac-test) it runs on the
// GPU.
func TestRun(t *testing.T) {
	full := os.Getenv("STARTLUX_METAL_FULL") != ""
	be := backendUnderTest(t)
	r := Run(context.Background(), be, cpuBackend(t), Options{NoModel: !full && !onGPU})
	t.Logf("%s: %d families and %d model rows in %s; model max rel %.1e at %s", r.Backend, len(r.Families), r.Model.Rows, r.Elapsed, r.Model.MaxRel, r.Model.Where)
	if !r.OK() || r.Note() != "" || r.Err() != nil {
		t.Fatalf("reason %q: %+v", r.Reason(), r)
	}
	if want := 2 + 2*len(metal.AllWeightForms()) + 5; len(r.Families) != want {
		t.Errorf("%d families, want %d", len(r.Families), want)
	}
	if full || onGPU {
		if !r.Model.Ran || r.Model.Rows != 3 || r.Model.MaxRel > ModelTol/100 {
			t.Errorf("model: %+v", r.Model)
		}
	} else if r.Model.Ran {
		t.Errorf("the model pass ran with NoModel: %+v", r.Model)
	}
}

func TestApplies(t *testing.T) {
	if Applies(cpuBackend(t)) {
		t.Error("the CPU backend needs no check")
	}
	if !Applies(backendUnderTest(t)) {
		t.Error("the Metal backend is checked")
	}
}
