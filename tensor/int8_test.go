package tensor

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func newRNG(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 16))
}

// checkQuantized checks q and scale against v by properties that any
// correct symmetric per-vector quantiser has, computed in float64: the
// scale is max|v|/127 to within float32 rounding, every q[i] is the nearest
// integer to v[i]/scale (within the slack of the float32 arithmetic), the
// largest magnitude maps to ±127, and q stays in [−127, 127]; a vector
// whose magnitudes are all below 2⁻¹⁰⁰ gives zeros and scale 0.
func checkQuantized(t *testing.T, what string, v []float32, q []int8, scale float32) {
	t.Helper()
	var amax float64
	for _, x := range v {
		amax = max(amax, math.Abs(float64(x)))
	}
	if amax < 0x1p-100 {
		if scale != 0 {
			t.Fatalf("%s: vector below the floor has scale %g", what, scale)
		}
		for i, x := range q {
			if x != 0 {
				t.Fatalf("%s: zero vector quantised to %d at %d", what, x, i)
			}
		}
		return
	}
	want := amax / 127
	if math.Abs(float64(scale)-want) > want*1e-7 {
		t.Fatalf("%s: scale %g, want %g", what, scale, want)
	}
	for i, x := range v {
		exact := float64(x) / want
		if q[i] < -127 {
			t.Fatalf("%s: q[%d] = %d below −127", what, i, q[i])
		}
		if d := math.Abs(float64(q[i]) - exact); d > 0.5+1e-4 {
			t.Fatalf("%s: v[%d] = %g quantised to %d, exact %g", what, i, x, q[i], exact)
		}
		if math.Abs(float64(x)) == amax && math.Abs(float64(q[i])) != 127 {
			t.Fatalf("%s: the largest magnitude v[%d] = %g quantised to %d", what, i, x, q[i])
		}
	}
}

func TestQuantizeInt8Vec(t *testing.T) {
	rng := newRNG(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name   string
		v      []float32
		want   []int8 // nil: check properties only
		finite bool
	}{
		{"empty", nil, []int8{}, true},
		{"zeros", []float32{0, 0, float32(math.Copysign(0, -1))}, []int8{0, 0, 0}, true},
		{"below the floor", []float32{0x1p-101, -0x1p-120}, []int8{0, 0}, true},
		{"subnormal", []float32{1e-45, 0}, []int8{0, 0}, true},
		// amax 127 gives inv 1: v itself is rounded, half to even.
		{"ties to even", []float32{127, 2.5, 3.5, -2.5, -3.5, 0.5, -0.5, 126.5}, []int8{127, 2, 4, -2, -4, 0, 0, 126}, true},
		{"negative max", []float32{-254, 127, 1, -1.5}, []int8{-127, 64, 0, -1}, true}, // 63.5 → 64, −0.75 → −1, 0.5 → 0
		{"one outlier", []float32{1000, 1, -3, 4, 0.01}, nil, true},
		{"NaN", []float32{1, nan, 2}, []int8{0, 0, 0}, false},
		{"infinity", []float32{1, -inf}, []int8{0, 0}, false},
		{"largest float", []float32{math.MaxFloat32, -1e38, 1}, nil, true},
		{"random", randVec32(rng, 1000, 3), nil, true},
	}
	for _, tc := range tests {
		q := make([]int8, len(tc.v))
		for i := range q {
			q[i] = 99 // stale contents
		}
		scale, finite := QuantizeInt8Vec(q, tc.v)
		if finite != tc.finite {
			t.Fatalf("%s: finite = %v, want %v", tc.name, finite, tc.finite)
		}
		if !finite {
			if !math.IsNaN(float64(scale)) {
				t.Errorf("%s: scale %g, want NaN", tc.name, scale)
			}
		} else {
			checkQuantized(t, tc.name, tc.v, q, scale)
		}
		if tc.want != nil {
			for i := range q {
				if q[i] != tc.want[i] {
					t.Fatalf("%s: q = %v, want %v", tc.name, q, tc.want)
				}
			}
		}
	}
}

func TestAbsMax(t *testing.T) {
	tests := []struct {
		v      []float32
		want   float32
		finite bool
	}{
		{nil, 0, true},
		{[]float32{-3, 2, 1}, 3, true},
		{[]float32{float32(math.Copysign(0, -1))}, 0, true},
		{[]float32{1, float32(math.Inf(-1))}, float32(math.Inf(1)), false},
		{[]float32{float32(math.NaN()), 5}, 0, false},
	}
	for _, tc := range tests {
		got, finite := AbsMax(tc.v)
		if finite != tc.finite || (finite && got != tc.want) {
			t.Errorf("AbsMax(%v) = %v, %v; want %v, %v", tc.v, got, finite, tc.want, tc.finite)
		}
	}
}

func randVec32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

// mlxWeight returns a random MLX affine-quantised [o, in] weight.
func mlxWeight(rng *rand.Rand, o, in, bits, group int) *Weight {
	packed := make([]byte, o*in*bits/8)
	for i := range packed {
		packed[i] = byte(rng.Uint32())
	}
	return &Weight{
		Name: "q", DType: U32, Shape: []int{o, in}, Data: packed,
		Quant: &Quant{
			Bits: bits, Group: group,
			Scales: FromFloat32("q.scales", BF16, []int{o, in / group}, randVec32(rng, o*in/group, 0.05)),
			Biases: FromFloat32("q.biases", BF16, []int{o, in / group}, randVec32(rng, o*in/group, 0.1)),
		},
	}
}

func TestQuantizeInt8(t *testing.T) {
	rng := newRNG(t)
	o, n := 9, 96
	v := randVec32(rng, o*n, 0.05)
	for c := range n {
		v[2*n+c] = 0 // a row of zeros
	}
	v[4*n+7] = 40    // an outlier
	v[5*n+3] = -1e30 // an outlier beyond bf16's and f16's range: f16 stores −Inf
	ws := []*Weight{
		FromFloat32("f32", F32, []int{o, n}, v),
		FromFloat32("bf16", BF16, []int{o, n}, v),
		mlxWeight(rng, o, n, 4, 32),
		mlxWeight(rng, o, n, 3, 32),
		mlxWeight(rng, o, n, 8, 32),
	}
	vf := append([]float32(nil), v...)
	vf[5*n+3] = -1e4
	ws = append(ws, FromFloat32("f16", F16, []int{o, n}, vf))
	for _, w := range ws {
		q, err := QuantizeInt8(w)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		if q.Name != w.Name || q.DType != I8 || q.Rows() != o || q.Cols() != n || q.Bytes() != int64(o*n+8*o) {
			t.Fatalf("%s: got %s %s %v, %d bytes", w.Name, q.Name, q.DType, q.Shape, q.Bytes())
		}
		ref := make([]float32, n)
		deq := make([]float32, n)
		for r := range o {
			w.Row(r, ref)
			qr := q.Int8Row(r)
			checkQuantized(t, w.Name, ref, qr, q.Int8.Scales[r])
			var sum int32
			for _, x := range qr {
				sum += int32(x)
			}
			if sum != q.Int8.Sums[r] {
				t.Fatalf("%s row %d: sum %d, recorded %d", w.Name, r, sum, q.Int8.Sums[r])
			}
			// Row dequantises: scale·q, within half a step of the original.
			q.Row(r, deq)
			s := q.Int8.Scales[r]
			for c := range deq {
				if deq[c] != s*float32(qr[c]) {
					t.Fatalf("%s: Row(%d)[%d] = %g, want %g·%d", w.Name, r, c, deq[c], s, qr[c])
				}
				if e := math.Abs(float64(deq[c]) - float64(ref[c])); e > 0.5*float64(s)*(1+1e-5) {
					t.Fatalf("%s: Row(%d)[%d] = %g, original %g, step %g", w.Name, r, c, deq[c], ref[c], s)
				}
			}
		}
		if q.Int8.Scales[2] != 0 && w.Quant == nil {
			t.Fatalf("%s: the zero row has scale %g", w.Name, q.Int8.Scales[2])
		}
		if again, err := QuantizeInt8(q); err != nil || again != q {
			t.Fatalf("%s: QuantizeInt8 of an int8 weight = %p, %v; want it unchanged", w.Name, again, err)
		}
	}
}

func TestQuantizeInt8Errors(t *testing.T) {
	v := []float32{1, 2, 3, 4, 5, 6}
	v[4] = float32(math.NaN())
	tests := []struct {
		name string
		w    *Weight
		want string
	}{
		{"NaN", FromFloat32("w", F32, []int{2, 3}, v), "w: row 1 holds a NaN"},
		{"vector", FromFloat32("norm", F32, []int{6}, make([]float32, 6)), "norm: shape [6] is not a matrix"},
		{"too wide", &Weight{Name: "wide", DType: BF16, Shape: []int{1, MaxInt8Cols + 2}, Data: make([]byte, 2*(MaxInt8Cols+2))}, "wide: 131074 in-features"},
		{"bad bytes", &Weight{Name: "short", DType: BF16, Shape: []int{2, 2}, Data: make([]byte, 6)}, "short: 6 bytes"},
	}
	for _, tc := range tests {
		_, err := QuantizeInt8(tc.w)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestQuantizeInt8Cols holds the column-scaled conversion to QuantizeInt8
// of the matrix scaled beforehand (the same float32 products, so the same
// bytes and scales), from bf16 and MLX-quantised weights, and checks its
// refusals.
func TestQuantizeInt8Cols(t *testing.T) {
	rng := newRNG(t)
	o, n := 7, 64
	cols := randVec32(rng, n, 1)
	for i := range cols {
		cols[i] = float32(math.Exp(float64(3 * cols[i]))) // factors over e^±3
	}
	for _, w := range []*Weight{FromFloat32("bf16", BF16, []int{o, n}, randVec32(rng, o*n, 0.05)), mlxWeight(rng, o, n, 4, 32)} {
		got, err := QuantizeInt8Cols(w, cols)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		scaled := w.Float32s()
		for i := range scaled {
			scaled[i] *= cols[i%n]
		}
		want, err := QuantizeInt8(FromFloat32(w.Name, F32, []int{o, n}, scaled))
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != string(want.Data) || !slices.Equal(got.Int8.Scales, want.Int8.Scales) || !slices.Equal(got.Int8.Sums, want.Int8.Sums) {
			t.Errorf("%s: column-scaled conversion differs from converting the scaled matrix", w.Name)
		}
		if plain, err := QuantizeInt8Cols(w, nil); err != nil || string(plain.Data) == string(got.Data) {
			t.Errorf("%s: nil factors: %v, or the same bytes as with factors", w.Name, err)
		}
	}
	w := FromFloat32("w", F32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	q, _ := QuantizeInt8(w)
	for _, tc := range []struct {
		name string
		w    *Weight
		cols []float32
		want string
	}{
		{"count", w, []float32{1, 2}, "w: 2 column factors for 3 in-features"},
		{"inf", w, []float32{1, float32(math.Inf(1)), 1}, "w: a column factor is a NaN or an infinity"},
		{"int8", q, []float32{1, 1, 1}, "w: column factors on a weight that is int8 already"},
	} {
		if _, err := QuantizeInt8Cols(tc.w, tc.cols); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestInt8Validate(t *testing.T) {
	good := func() *Weight {
		return Int8FromValues("w", 2, 3, []int8{1, -128, 127, 0, 5, -5}, []float32{0.5, 0})
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		spoil func(w *Weight)
		want  string
	}{
		{"no scales", func(w *Weight) { w.Int8 = nil }, "lacks its channel scales"},
		{"short data", func(w *Weight) { w.Data = w.Data[:5] }, "5 bytes of int8 data"},
		{"scale count", func(w *Weight) { w.Int8.Scales = w.Int8.Scales[:1] }, "1 scales and 2 sums"},
		{"negative scale", func(w *Weight) { w.Int8.Scales[1] = -1 }, "channel 1 has scale -1"},
		{"NaN scale", func(w *Weight) { w.Int8.Scales[0] = float32(math.NaN()) }, "channel 0 has scale NaN"},
		{"wrong sum", func(w *Weight) { w.Int8.Sums[0]++ }, "channel 0 sums to 0, recorded 1"},
		{"not a matrix", func(w *Weight) { w.Shape = []int{6} }, "int8 shape [6]"},
		{"float dtype", func(w *Weight) { w.DType = BF16 }, "int8 channel scales on a BF16 weight"},
		{"with MLX parameters", func(w *Weight) { w.Quant = &Quant{} }, "MLX quantisation"},
	}
	for _, tc := range tests {
		w := good()
		tc.spoil(w)
		err := w.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestInt8SelectRowsAndBytes(t *testing.T) {
	w := Int8FromValues("w", 3, 2, []int8{1, 2, -3, 4, 127, -128}, []float32{1, 2, 3})
	s := w.SelectRows("sel", []int{2, 0})
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := s.Float32s()
	want := []float32{381, -384, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("selected rows dequantise to %v, want %v", got, want)
		}
	}
	if s.Int8.Sums[0] != -1 || s.Bytes() != 2*2+2*8 {
		t.Fatalf("sums %v, bytes %d", s.Int8.Sums, s.Bytes())
	}
	m := mlxWeight(rand.New(rand.NewPCG(1, 2)), 4, 64, 4, 32)
	if want := int64(4*64/2 + 2*4*2*2); m.Bytes() != want {
		t.Fatalf("MLX weight Bytes = %d, want %d", m.Bytes(), want)
	}
}

// TestQuantizeInt8Memory checks that the conversion never holds a float32
// copy of the matrix: it allocates little beyond the int8 result.
func TestQuantizeInt8Memory(t *testing.T) {
	rng := newRNG(t)
	o, n := 512, 1024
	for _, w := range []*Weight{FromFloat32("bf16", BF16, []int{o, n}, randVec32(rng, o*n, 1)), mlxWeight(rng, o, n, 4, 64)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := QuantizeInt8(w); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(o*n + o*n/4 + runtime.GOMAXPROCS(0)*4*n); alloc > limit {
			t.Errorf("%s: converting a [%d %d] weight allocated %d bytes, want at most %d (a float32 copy is %d)", w.Name, o, n, alloc, limit, 4*o*n)
		}
	}
}

// TestInt8MatMul holds the reference product to the float product of the
// unquantised activations and the dequantised weight: each output may be off
// by at most half an activation step times Σ|w| of its channel.
func TestInt8MatMul(t *testing.T) {
	rng := newRNG(t)
	rows, o, n := 7, 13, 70
	w, err := QuantizeInt8(FromFloat32("w", BF16, []int{o, n}, randVec32(rng, o*n, 0.1)))
	if err != nil {
		t.Fatal(err)
	}
	x := randVec32(rng, rows*n, 1)
	clear(x[3*n : 4*n]) // a zero row
	x[5*n+1] = 30       // an outlier
	out := make([]float32, rows*o)
	Int8MatMul(out, x, w, rows)
	wd := w.Float32s()
	for r := range rows {
		amax, _ := AbsMax(x[r*n : (r+1)*n])
		for c := range o {
			var want, absW float64
			for i := range n {
				want += float64(x[r*n+i]) * float64(wd[c*n+i])
				absW += math.Abs(float64(wd[c*n+i]))
			}
			bound := 0.5*float64(amax)/127*absW*(1+1e-5) + 1e-6*math.Abs(want)
			if e := math.Abs(float64(out[r*o+c]) - want); e > bound {
				t.Fatalf("out[%d,%d] = %g, float %g: error %g beyond %g", r, c, out[r*o+c], want, e, bound)
			}
			if r == 3 && out[r*o+c] != 0 {
				t.Fatalf("zero row gives %g", out[r*o+c])
			}
		}
	}
	x[2*n] = float32(math.Inf(1))
	Int8MatMul(out, x, w, rows)
	if !math.IsNaN(float64(out[2*o])) || math.IsNaN(float64(out[o])) {
		t.Fatalf("a row with an infinity gives %g (want NaN), the row before it %g", out[2*o], out[o])
	}
}

// BenchmarkQuantizeInt8 converts a bf16 Qwen3.5-0.8B DeltaNet qkv projection
// ([6144, 1024]), the cost a model pays per weight at load.
func BenchmarkQuantizeInt8(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := FromFloat32("qkv", BF16, []int{6144, 1024}, randVec32(rng, 6144*1024, 0.03))
	for _, c := range []struct {
		name string
		conv func(*Weight, []float32) (*Weight, error)
	}{{"absmax", QuantizeInt8Cols}, {"clip", QuantizeInt8ColsClip}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.conv(w, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w.Elems())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
		})
	}
}

// TestQuantizeInt8Clip holds the clipped quantiser to a brute-force search
// in float64 over the same ratios: for Gaussian rows and rows with a few
// large outliers, the chosen scale's squared error is the least of any
// ratio's (and never above the absmax rule's), q is the rounding at that
// scale with every value in [−127, 127], and a constant row (where no
// clipping can help) gives QuantizeInt8Vec's result.
func TestQuantizeInt8Clip(t *testing.T) {
	rng := newRNG(t)
	sqErr := func(v []float32, q []int8, s float32) float64 {
		var e float64
		for i, x := range v {
			d := float64(x) - float64(s)*float64(q[i])
			e += d * d
		}
		return e
	}
	clipped := 0
	for k := range 60 {
		n := 1 + rng.IntN(300)
		v := randVec32(rng, n, 1)
		if k%2 == 1 {
			for range 1 + rng.IntN(3) {
				v[rng.IntN(n)] *= 8
			}
		}
		q := make([]int8, n)
		s, ok := QuantizeInt8Clip(q, v)
		if !ok || !(s > 0) {
			t.Fatalf("row %d: scale %g, finite %v", k, s, ok)
		}
		got := sqErr(v, q, s)
		amax, _ := AbsMax(v)
		qv := make([]int8, n)
		for j := range Int8ClipSteps {
			a := amax * (1 - float32(j)/100)
			for i, x := range v {
				qv[i] = int8(max(-127, min(127, math.RoundToEven(float64(x*(127/a))))))
			}
			if e := sqErr(v, qv, a/127); e < got*(1-1e-9) {
				t.Fatalf("row %d: ratio %.2f leaves %g, the chosen scale %g leaves %g", k, 1-float64(j)/100, e, s, got)
			}
		}
		for i, x := range v {
			want := max(-127, min(127, math.RoundToEven(float64(x*(1/s)))))
			if math.Abs(float64(q[i])-want) > 1 || q[i] < -127 {
				t.Fatalf("row %d: v[%d] = %g quantised to %d at scale %g", k, i, x, q[i], s)
			}
		}
		sv, _ := QuantizeInt8Vec(qv, v)
		if sv != s {
			clipped++
		}
	}
	if clipped == 0 {
		t.Errorf("no row was clipped")
	}
	t.Logf("%d of 60 rows clipped", clipped)
	v := []float32{0.5, -0.5, 0.5, 0.5}
	q, qv := make([]int8, 4), make([]int8, 4)
	s, _ := QuantizeInt8Clip(q, v)
	sv, _ := QuantizeInt8Vec(qv, v)
	if s != sv || !slices.Equal(q, qv) {
		t.Errorf("constant row: %v × %g, want %v × %g", q, s, qv, sv)
	}
	if s, ok := QuantizeInt8Clip(q, []float32{0, 0, 0, 0}); s != 0 || !ok {
		t.Errorf("zero row: scale %g, finite %v", s, ok)
	}
	if _, ok := QuantizeInt8Clip(q, []float32{1, float32(math.NaN()), 0, 0}); ok {
		t.Errorf("a NaN row is finite")
	}
	w := FromFloat32("w", BF16, []int{5, 40}, randVec32(rng, 200, 0.1))
	cw, err := QuantizeInt8ColsClip(w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cw.Validate(); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 40)
	for r := range 5 {
		w.Row(r, row)
		s, _ := QuantizeInt8Clip(make([]int8, 40), row)
		if cw.Int8.Scales[r] != s {
			t.Errorf("QuantizeInt8ColsClip channel %d scale %g, QuantizeInt8Clip %g", r, cw.Int8.Scales[r], s)
		}
	}
}
