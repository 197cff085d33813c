package metal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

func cpuRef(t *testing.T) tensor.Backend {
	t.Helper()
	c, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSelfCheck: the backend under test (the emulator, or the GPU with
// -tags mactest) passes every family, in every weight form.
func TestSelfCheck(t *testing.T) {
	res := SelfCheck(context.Background(), deviceUnderTest(t), cpuRef(t), nil)
	if want := 2 + 2*len(AllWeightForms()) + 5; len(res) != want {
		t.Fatalf("%d families, want %d", len(res), want)
	}
	for _, r := range res {
		t.Logf("%-22s max rel %.1e (tol %.0e) at %s", r.Family, r.MaxRel, r.Tol, r.Where)
		if !r.OK() || r.Note() != "" {
			t.Errorf("%s: %+v: %s", r.Family, r, r.Note())
		}
	}
}

// doubledAttention is a backend whose attention output comes out twice as
// large: a kernel gone wrong.
type doubledAttention struct{ tensor.Backend }

func (b doubledAttention) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	b.Backend.Attention(out, q, k, v, a)
	b.Backend.Add(out, out, out.Len())
}

// failingSync is a backend whose command buffers fail.
type failingSync struct{ tensor.Backend }

var errBuffer = errors.New("command buffer failed: Caused GPU Timeout Error")

func (b failingSync) Sync(ctx context.Context) error { b.Backend.Sync(ctx); return errBuffer }
func (b failingSync) Read(ctx context.Context, t tensor.Tensor, off int, dst []float32) error {
	b.Backend.Read(ctx, t, off, dst)
	return errBuffer
}

// panickingRoPE is a backend whose RoPE refuses its arguments.
type panickingRoPE struct{ tensor.Backend }

func (panickingRoPE) RoPE(x tensor.Tensor, pos []int32, heads, hd, rd int, theta float32) {
	panic("metal: rope: bad arguments")
}

// TestSelfCheckFindsFaults shows each kind of failure reported on its own
// family, with the note a daemon would show, and the other families
// unaffected.
func TestSelfCheckFindsFaults(t *testing.T) {
	ctx := context.Background()
	be, ref := deviceUnderTest(t), cpuRef(t)
	bf16 := []WeightForm{{DType: tensor.BF16}}
	byName := func(res []FamilyResult) map[string]FamilyResult {
		m := map[string]FamilyResult{}
		for _, r := range res {
			m[r.Family] = r
		}
		return m
	}

	res := byName(SelfCheck(ctx, doubledAttention{be}, ref, bf16))
	if a := res["attention"]; a.OK() || a.Err != nil || a.MaxRel < 0.5 ||
		!strings.HasPrefix(a.Note(), "Metal disabled: attention kernel differs from the CPU by ") || !strings.Contains(a.Note(), " at head ") {
		t.Errorf("doubled attention: %+v, note %q", a, a.Note())
	}
	for name, r := range res {
		if name != "attention" && !r.OK() {
			t.Errorf("%s failed beside a broken attention: %+v", name, r)
		}
	}

	res = byName(SelfCheck(ctx, panickingRoPE{be}, ref, bf16))
	if r := res["rope"]; r.Err == nil || !strings.Contains(r.Note(), "rope kernel failed: panic: metal: rope: bad arguments") {
		t.Errorf("panicking rope: %+v, note %q", r, r.Note())
	}
	if r := res["gated delta"]; !r.OK() {
		t.Errorf("the family after a panic: %+v", r)
	}

	for _, r := range SelfCheck(ctx, failingSync{be}, ref, bf16) {
		if !errors.Is(r.Err, errBuffer) || !strings.Contains(r.Note(), "kernel failed: command buffer failed") {
			t.Errorf("failing command buffers, %s: %+v", r.Family, r)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, r := range SelfCheck(cctx, be, ref, bf16) {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("a cancelled context, %s: %+v", r.Family, r)
		}
	}
}

// TestFormsOf: the distinct forms of the matrices, in first-seen order;
// vectors and missing weights have none.
func TestFormsOf(t *testing.T) {
	mat := func(d tensor.DType) *tensor.Weight {
		return tensor.FromFloat32("w", d, []int{2, 64}, make([]float32, 128))
	}
	q := func(bits int, d tensor.DType) *tensor.Weight {
		return &tensor.Weight{Name: "q", DType: tensor.U32, Shape: []int{2, 64}, Data: make([]byte, 2*64*bits/8), Quant: &tensor.Quant{
			Bits: bits, Group: 32, Scales: mat(d), Biases: mat(d)}}
	}
	i8, err := tensor.QuantizeInt8(mat(tensor.F32))
	if err != nil {
		t.Fatal(err)
	}
	vec := tensor.FromFloat32("norm", tensor.F32, []int{64}, make([]float32, 64))
	got := FormsOf([]*tensor.Weight{vec, mat(tensor.BF16), q(4, tensor.BF16), nil, mat(tensor.BF16), i8, q(8, tensor.F16), q(4, tensor.BF16)})
	want := []WeightForm{{DType: tensor.BF16}, {DType: tensor.BF16, Bits: 4, Group: 32}, {DType: tensor.I8}, {DType: tensor.F16, Bits: 8, Group: 32}}
	if !slices.Equal(got, want) {
		t.Errorf("FormsOf = %v, want %v", got, want)
	}
}
