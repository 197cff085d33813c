package work

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

// pairsByLoop counts, one by one, the (query, key) pairs that causal
// attention with a prefix computes: the independent path Attention's closed
// form is checked against.
func pairsByLoop(a tensor.AttnArgs) int64 {
	var n int64
	for b := range a.B {
		p := 0
		if a.Prefix != nil {
			p = a.Prefix[b].Len
		}
		for i := 0; i < a.T; i++ {
			if a.Len != nil && i >= a.Len[b] {
				continue // padding query
			}
			for j := 0; j < p+a.T; j++ {
				if j < p || j-p <= i {
					n++
				}
			}
		}
	}
	return n
}

func TestAttention(t *testing.T) {
	kv := func(n int) tensor.KV { return tensor.KV{Len: n} }
	tests := []struct {
		name string
		a    tensor.AttnArgs
	}{
		{"one row", tensor.AttnArgs{B: 1, T: 7, Heads: 4, KVHeads: 2, HeadDim: 32}},
		{"one token", tensor.AttnArgs{B: 1, T: 1, Heads: 1, KVHeads: 1, HeadDim: 8}},
		{"padded rows", tensor.AttnArgs{B: 3, T: 9, Heads: 8, KVHeads: 2, HeadDim: 16, Len: []int{9, 4, 1}}},
		{"prefixes", tensor.AttnArgs{B: 3, T: 5, Heads: 4, KVHeads: 4, HeadDim: 32,
			Prefix: []tensor.KV{kv(52), kv(0), kv(1568)}, Len: []int{5, 3, 2}}},
		{"gathered queries", tensor.AttnArgs{B: 4, T: 1, Heads: 2, KVHeads: 1, HeadDim: 64,
			Prefix: []tensor.KV{kv(100), kv(101), kv(7), kv(0)}}},
		{"all padding", tensor.AttnArgs{B: 2, T: 3, Heads: 2, KVHeads: 1, HeadDim: 4, Len: []int{0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := 4 * int64(tt.a.Heads*tt.a.HeadDim) * pairsByLoop(tt.a)
			if got := Attention(tt.a); got != want {
				t.Errorf("Attention = %d, want %d", got, want)
			}
		})
	}
}

// TestCounter runs each counted op through a Counter and directly on a
// second CPU backend: the outputs must be equal bit for bit, and the counts
// must add up over calls.
func TestCounter(t *testing.T) {
	direct, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := cpu.New(cpu.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := New(wrapped)
	rng := rand.New(rand.NewPCG(3, 4))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	// run allocates the same inputs on both backends, calls f on each and
	// compares the n floats of the output.
	run := func(name string, n int, ins [][]float32, f func(be tensor.Backend, out tensor.Tensor, in []tensor.Tensor)) {
		t.Helper()
		var outs [2][]float32
		for i, be := range []tensor.Backend{direct, c} {
			var ts []tensor.Tensor
			for _, v := range ins {
				x := be.Alloc(len(v))
				be.Write(x, 0, v)
				ts = append(ts, x)
			}
			out := be.Alloc(n)
			f(be, out, ts)
			outs[i] = make([]float32, n)
			if err := be.Read(t.Context(), out, 0, outs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(outs[0], outs[1]) {
			t.Errorf("%s: the counter's output differs from the backend's", name)
		}
	}

	w := &tensor.Weight{Name: "w", Shape: []int{24, 40}, DType: tensor.F32}
	w.Data = f32Bytes(vec(24 * 40))
	run("MatMul", 5*24, [][]float32{vec(5 * 40)}, func(be tensor.Backend, out tensor.Tensor, in []tensor.Tensor) {
		be.MatMul(out, in[0], w, 5)
	})
	want := Counts{MatMul: MatMul(5, 24, 40)}
	if got := c.Counts(); got != want {
		t.Fatalf("after MatMul: %+v, want %+v", got, want)
	}

	a := tensor.AttnArgs{B: 2, T: 6, Heads: 4, KVHeads: 2, HeadDim: 8, Scale: 0.3, Len: []int{6, 2}}
	qn, kn := a.B*a.T*a.Heads*a.HeadDim, a.B*a.T*a.KVHeads*a.HeadDim
	run("Attention", qn, [][]float32{vec(qn), vec(kn), vec(kn)}, func(be tensor.Backend, out tensor.Tensor, in []tensor.Tensor) {
		be.Attention(out, in[0], in[1], in[2], a)
	})
	want.Attention = 4 * 4 * 8 * pairsByLoop(a)
	if got := c.Counts(); got != want {
		t.Fatalf("after Attention: %+v, want %+v", got, want)
	}

	d := tensor.DeltaArgs{B: 2, T: 3, NK: 1, NV: 2, DK: 4, DV: 4, Chunk: 2}
	conv := d.B * d.T * (2*d.NK*d.DK + d.NV*d.DV)
	gates := d.B * d.T * d.NV
	aLog := &tensor.Weight{Name: "a_log", Shape: []int{d.NV}, DType: tensor.F32, Data: f32Bytes(vec(d.NV))}
	dtBias := &tensor.Weight{Name: "dt_bias", Shape: []int{d.NV}, DType: tensor.F32, Data: f32Bytes(vec(d.NV))}
	run("GatedDelta", d.B*d.T*d.NV*d.DV, [][]float32{vec(conv), vec(gates), vec(gates), make([]float32, d.NV*d.DK*d.DV), make([]float32, d.NV*d.DK*d.DV)},
		func(be tensor.Backend, out tensor.Tensor, in []tensor.Tensor) {
			da := d
			da.State = in[3:5]
			be.GatedDelta(out, in[0], in[1], in[2], aLog, dtBias, da)
		})
	want.Delta = 6 * int64(d.B*d.T*d.NV*d.DK*d.DV)
	if got := c.Counts(); got != want {
		t.Fatalf("after GatedDelta: %+v, want %+v", got, want)
	}

	// A second MatMul adds to the first; Sub takes it back out.
	before := c.Counts()
	run("MatMul again", 3*24, [][]float32{vec(3 * 40)}, func(be tensor.Backend, out tensor.Tensor, in []tensor.Tensor) {
		be.MatMul(out, in[0], w, 3)
	})
	if got := c.Counts().Sub(before); got != (Counts{MatMul: MatMul(3, 24, 40)}) {
		t.Errorf("second MatMul counted %+v, want %d in MatMul", got, MatMul(3, 24, 40))
	}
	if got, want := c.Counts().Total(), want.Total()+MatMul(3, 24, 40); got != want {
		t.Errorf("Total = %d, want %d", got, want)
	}
}

// f32Bytes returns v as little-endian float32 bytes, a checkpoint's layout.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

// mapper is a backend that records the optional calls a Counter passes on.
type mapper struct {
	tensor.Backend
	mapped, warmed int
}

func (m *mapper) MapRegion([]byte) error       { m.mapped++; return nil }
func (m *mapper) WarmUp(context.Context) error { m.warmed++; return nil }

// TestOptionalInterfaces checks that a Counter passes MapRegion and WarmUp
// on to a backend that has them and does nothing for one that has not.
func TestOptionalInterfaces(t *testing.T) {
	m := &mapper{}
	c := New(m)
	if err := c.MapRegion(nil); err != nil || m.mapped != 1 {
		t.Errorf("MapRegion: err %v, passed on %d times, want once", err, m.mapped)
	}
	if err := c.WarmUp(t.Context()); err != nil || m.warmed != 1 {
		t.Errorf("WarmUp: err %v, passed on %d times, want once", err, m.warmed)
	}
	// A backend with neither: the calls must succeed and reach nothing.
	var plain struct{ tensor.Backend }
	c = New(plain)
	if err := c.MapRegion(nil); err != nil {
		t.Errorf("MapRegion without a mapper: %v", err)
	}
	if err := c.WarmUp(t.Context()); err != nil {
		t.Errorf("WarmUp without a warm-upper: %v", err)
	}
}
