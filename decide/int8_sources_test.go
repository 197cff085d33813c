package decide

import (
	"context"
	"math"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

// roundingBackend runs a float engine's products by the projections whose
// names match only (and not skip) with the weight rounded to int8 per
// channel (w8, dequantised), the activation rows rounded to int8 per row
// (a8, dequantised), or both (the reference int8 product,
// tensor.Int8MatMul, as an int8 load runs it): the two halves of the int8
// error apart. With one of them the product stays float.
type roundingBackend struct {
	tensor.Backend
	only, skip *regexp.Regexp
	w8, a8     bool
	mu         sync.Mutex
	rounded    map[*tensor.Weight]*tensor.Weight
}

// projectionRe matches the names of the projections an int8 load converts.
var projectionRe = regexp.MustCompile(`\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|out_proj|gate_proj|up_proj|down_proj)\.`)

func (b *roundingBackend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	if !projectionRe.MatchString(w.Name) || !b.only.MatchString(w.Name) || (b.skip != nil && b.skip.MatchString(w.Name)) {
		b.Backend.MatMul(out, x, w, rows)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w8 && b.a8 {
		q, ok := b.rounded[w]
		if !ok {
			var err error
			if q, err = tensor.QuantizeInt8(w); err != nil {
				panic(err)
			}
			b.rounded[w] = q
		}
		n := w.Cols()
		xs := make([]float32, rows*n)
		if err := b.Backend.Read(context.Background(), x, 0, xs); err != nil {
			panic(err)
		}
		res := make([]float32, rows*w.Rows())
		tensor.Int8MatMul(res, xs, q, rows)
		b.Backend.Write(out, 0, res)
		return
	}
	src := w
	if b.w8 {
		r, ok := b.rounded[w]
		if !ok {
			q, err := tensor.QuantizeInt8(w)
			if err != nil {
				panic(err)
			}
			r = tensor.FromFloat32(w.Name, tensor.F32, w.Shape, q.Float32s())
			b.rounded[w] = r
		}
		src = r
	}
	if b.a8 {
		n := w.Cols()
		xs := make([]float32, rows*n)
		if err := b.Backend.Read(context.Background(), x, 0, xs); err != nil {
			panic(err)
		}
		q := make([]int8, n)
		for r := range rows {
			s, _ := tensor.QuantizeInt8Vec(q, xs[r*n:(r+1)*n])
			for i, v := range q {
				xs[r*n+i] = float32(v) * s
			}
		}
		t := b.Backend.Alloc(rows * n)
		defer b.Backend.Free(t)
		b.Backend.Write(t, 0, xs)
		x = t
	}
	b.Backend.MatMul(out, x, src, rows)
}

// runRounded answers reqs with the float engine on a roundingBackend.
func runRounded(t *testing.T, reqs []*Request, only, skip string, w8, a8 bool) int8Run {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb := &roundingBackend{Backend: be, only: regexp.MustCompile(only), w8: w8, a8: a8, rounded: map[*tensor.Weight]*tensor.Weight{}}
	if skip != "" {
		rb.skip = regexp.MustCompile(skip)
	}
	e, err := Open(demoDir(), rb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return answerAll(t, e, reqs)
}

// TestInt8Sources attributes the demo model's int8 error on the golden
// requests: the weights' rounding and the activations' apart, over every
// projection, each kind and each layer, and with one part left in float
// (a diagnosis, not a configuration: the issue converts every projection).
// The figures are docs/int8.md's.
func TestInt8Sources(t *testing.T) {
	measureInt8(t)
	reqs := goldenRequests(t)
	f := runRounded(t, reqs, `$^`, "", false, false)
	for _, c := range []struct{ only, skip string }{
		{`.`, ""}, {`self_attn`, ""}, {`linear_attn`, ""}, {`mlp`, ""},
		{`q_proj|k_proj|v_proj`, ""}, {`o_proj`, ""}, {`in_proj_qkv`, ""}, {`in_proj_z`, ""}, {`out_proj`, ""},
		{`gate_proj|up_proj`, ""}, {`down_proj`, ""},
		{`layers\.0\.`, ""}, {`layers\.1\.`, ""}, {`layers\.2\.`, ""}, {`layers\.3\.`, ""}, {`layers\.4\.`, ""}, {`layers\.5\.`, ""},
		{`layers\.2\.linear_attn\.out_proj`, ""},
		{`.`, `layers\.2\.linear_attn\.out_proj`}, {`.`, `layers\.2\.`}, {`.`, `down_proj`},
	} {
		for _, m := range []struct{ w8, a8 bool }{{true, true}, {true, false}, {false, true}} {
			q := runRounded(t, reqs, c.only, c.skip, m.w8, m.a8)
			name := c.only
			if c.skip != "" {
				name += " but " + c.skip
			}
			t.Logf("%s, weights rounded %v, activations rounded %v: %v", name, m.w8, m.a8, compareInt8(t, reqs, f, q))
		}
	}
}

// recordingBackend passes everything through and keeps the input rows of
// every projection product.
type recordingBackend struct {
	tensor.Backend
	mu   sync.Mutex
	rows map[string][][]float32
}

func (b *recordingBackend) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	if projectionRe.MatchString(w.Name) {
		n := w.Cols()
		xs := make([]float32, rows*n)
		if err := b.Backend.Read(context.Background(), x, 0, xs); err != nil {
			panic(err)
		}
		b.mu.Lock()
		for r := range rows {
			b.rows[w.Name] = append(b.rows[w.Name], xs[r*n:(r+1)*n])
		}
		b.mu.Unlock()
	}
	b.Backend.MatMul(out, x, w, rows)
}

// projectionInputs returns the input rows of every projection while the
// float engine answers reqs (the preamble's, run at open, left out).
func projectionInputs(t *testing.T, reqs []*Request) map[string][][]float32 {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb := &recordingBackend{Backend: be, rows: map[string][][]float32{}}
	e, err := Open(demoDir(), rb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rb.rows = map[string][][]float32{}
	if _, errs := e.DecideBatch(context.Background(), reqs); errs[0] != nil {
		t.Fatal(errs[0])
	}
	return rb.rows
}

// TestInt8Activations logs, for every projection's input on the golden
// requests, how peaked its rows are (max/RMS; √I is a single channel), the
// relative error of rounding them per row, the largest channel maxima,
// and how far past the warm-up requests' channel maxima (what calibration
// sees) the golden requests go. The figures are docs/int8.md's.
func TestInt8Activations(t *testing.T) {
	measureInt8(t)
	cal := projectionInputs(t, WarmUpRequests())
	gold := projectionInputs(t, goldenRequests(t))
	names := make([]string, 0, len(gold))
	for n := range gold {
		names = append(names, n)
	}
	slices.Sort(names)
	chanMax := func(rows [][]float32) []float64 {
		m := make([]float64, len(rows[0]))
		for _, r := range rows {
			for i, v := range r {
				m[i] = max(m[i], math.Abs(float64(v)))
			}
		}
		return m
	}
	for _, n := range names {
		rows := gold[n]
		m := len(rows[0])
		var peaks []float64
		var qerr, tot float64
		q := make([]int8, m)
		for _, r := range rows {
			var mx, ss float64
			for _, v := range r {
				mx = max(mx, math.Abs(float64(v)))
				ss += float64(v) * float64(v)
			}
			peaks = append(peaks, mx/math.Sqrt(ss/float64(m)))
			s, _ := tensor.QuantizeInt8Vec(q, r)
			for i, v := range r {
				d := float64(v) - float64(q[i])*float64(s)
				qerr += d * d
				tot += float64(v) * float64(v)
			}
		}
		slices.Sort(peaks)
		g, c := chanMax(rows), chanMax(cal[n])
		idx := make([]int, m)
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return -cmpFloat(g[a], g[b]) })
		med := slices.Clone(g)
		slices.Sort(med)
		worst, over := 0.0, 0
		for i := range g {
			r := g[i] / max(c[i], 1e-30)
			worst = max(worst, r)
			if r > 2 {
				over++
			}
		}
		t.Logf("%s (%d rows): row max/RMS median %.1f, p99 %.1f, max %.1f (√I %.1f); rounding rel. err %.4f; channel maxima %.1f (%d), %.1f (%d), %.1f (%d), median %.2f; golden/warm-up channel max up to %.1f×, %d channels over 2×",
			n, len(rows), peaks[len(peaks)/2], peaks[len(peaks)*99/100], peaks[len(peaks)-1], math.Sqrt(float64(m)), math.Sqrt(qerr/tot),
			g[idx[0]], idx[0], g[idx[1]], idx[1], g[idx[2]], idx[2], med[m/2], worst, over)
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
