package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// deltaCase is the input of one gated delta rule run.
type deltaCase struct {
	b, t, nk, nv, dk, dv int
	qkv, alpha, beta     []float32
	aLog, dtBias         *tensor.Weight
	state                [][]float32 // per row [nv, dk, dv]
}

func newDeltaCase(rng *rand.Rand, b, t, nk, nv, dk, dv int, zeroState bool) *deltaCase {
	c := &deltaCase{b: b, t: t, nk: nk, nv: nv, dk: dk, dv: dv}
	width := 2*nk*dk + nv*dv
	c.qkv = randVec(rng, b*t*width, 1)
	c.alpha = randVec(rng, b*t*nv, 1)
	c.beta = randVec(rng, b*t*nv, 1.5)
	al := make([]float32, nv)
	for j := range al {
		al[j] = float32(rng.Float64()*6 - 5) // exp(A_log) in [0.007, 2.7]: slow and fast decay
	}
	c.aLog = tensor.FromFloat32("A_log", tensor.F32, []int{nv}, al)
	c.dtBias = tensor.FromFloat32("dt_bias", tensor.BF16, []int{nv}, randVec(rng, nv, 1))
	c.state = make([][]float32, b)
	for r := range c.state {
		c.state[r] = make([]float32, nv*dk*dv)
		if !zeroState {
			c.state[r] = randVec(rng, nv*dk*dv, 0.3)
		}
	}
	return c
}

// reference runs the per-token recurrence of qwen35.md §5.4 in float64 over
// positions [t0, t1) of every row, starting from st (updated in place), and
// writes the outputs of those positions to out ([b·t, nv·dv]).
func (c *deltaCase) reference(st [][]float64, t0, t1 int, out []float64) {
	width := 2*c.nk*c.dk + c.nv*c.dv
	aL, dtb := f64s(c.aLog.Float32s()), f64s(c.dtBias.Float32s())
	l2 := func(x []float32, scale float64) []float64 {
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		f := scale / math.Sqrt(s+1e-6)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v) * f
		}
		return y
	}
	for r := range c.b {
		for t := t0; t < t1; t++ {
			tok := r*c.t + t
			row := c.qkv[tok*width : (tok+1)*width]
			for j := range c.nv {
				kh := j / (c.nv / c.nk)
				q := l2(row[kh*c.dk:(kh+1)*c.dk], 1/math.Sqrt(float64(c.dk)))
				k := l2(row[(c.nk+kh)*c.dk:(c.nk+kh+1)*c.dk], 1)
				v := row[2*c.nk*c.dk+j*c.dv:][:c.dv]
				beta := sigmoid64(float64(c.beta[tok*c.nv+j]))
				x := float64(c.alpha[tok*c.nv+j]) + dtb[j]
				sp := x
				if x <= 20 {
					sp = math.Log1p(math.Exp(x))
				}
				decay := math.Exp(-math.Exp(aL[j]) * sp)
				S := st[r][j*c.dk*c.dv : (j+1)*c.dk*c.dv]
				for i := range S {
					S[i] *= decay
				}
				for e := range c.dv {
					var m float64
					for d := range c.dk {
						m += S[d*c.dv+e] * k[d]
					}
					delta := beta * (float64(v[e]) - m)
					for d := range c.dk {
						S[d*c.dv+e] += k[d] * delta
					}
				}
				o := out[tok*c.nv*c.dv+j*c.dv:][:c.dv]
				for e := range c.dv {
					var s float64
					for d := range c.dk {
						s += S[d*c.dv+e] * q[d]
					}
					o[e] = s
				}
			}
		}
	}
}

// deltaForms returns the test backends twice where a vector loop can run
// the recurrent form: once as they are, and once forced to the chunked form
// (chunkedDelta), so that each case with heads the recurrent form takes (dv
// a multiple of 16) runs through both forms.
func deltaForms(t *testing.T) []testBackend {
	t.Helper()
	var out []testBackend
	for _, tb := range backends(t) {
		out = append(out, tb)
		if recurrentKernel(16) {
			nb, err := New(Options{Threads: tb.b.threads, NoBLAS: tb.b.blas == nil})
			if err != nil {
				t.Fatal(err)
			}
			nb.chunkedDelta = true
			out = append(out, testBackend{tb.name + "/chunked", nb})
		}
	}
	return out
}

// run runs the backend over positions [t0, t1) of every row, with the
// backend's state tensors sts.
func (c *deltaCase) run(b *Backend, sts []tensor.Tensor, t0, t1, chunk int) []float32 {
	width := 2*c.nk*c.dk + c.nv*c.dv
	n := t1 - t0
	sub := func(v []float32, w int) []float32 {
		out := make([]float32, 0, c.b*n*w)
		for r := range c.b {
			out = append(out, v[(r*c.t+t0)*w:(r*c.t+t1)*w]...)
		}
		return out
	}
	out := b.Alloc(c.b * n * c.nv * c.dv)
	b.GatedDelta(out, upload(b, sub(c.qkv, width)), upload(b, sub(c.alpha, c.nv)), upload(b, sub(c.beta, c.nv)),
		c.aLog, c.dtBias, tensor.DeltaArgs{B: c.b, T: n, NK: c.nk, NV: c.nv, DK: c.dk, DV: c.dv, Chunk: chunk, State: sts})
	got := make([]float32, c.b*n*c.nv*c.dv)
	copy(got, data(out))
	return got
}

func TestGatedDelta(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range deltaForms(t) {
		for _, sh := range []struct {
			b, t, nk, nv, dk, dv int
			zero                 bool
		}{
			{1, 1, 1, 1, 4, 4, true},
			{1, 1, 1, 2, 8, 6, false},
			{2, 63, 2, 4, 16, 8, false},
			{1, 64, 1, 1, 32, 32, false},
			{2, 65, 2, 2, 16, 24, true},
			{1, 130, 2, 6, 32, 16, false},
			{2, 121, 2, 4, 32, 32, false},
			{1, 3, 2, 2, 8, 48, true},
			{1, 200, 1, 1, 128, 128, false},
		} {
			t.Run(fmt.Sprintf("%s/B%d,T%d,nk%d,nv%d,dk%d,dv%d,zero=%v", tb.name, sh.b, sh.t, sh.nk, sh.nv, sh.dk, sh.dv, sh.zero), func(t *testing.T) {
				c := newDeltaCase(rng, sh.b, sh.t, sh.nk, sh.nv, sh.dk, sh.dv, sh.zero)
				st64 := make([][]float64, c.b)
				sts := make([]tensor.Tensor, c.b)
				for r := range c.b {
					st64[r] = f64s(c.state[r])
					sts[r] = upload(tb.b, c.state[r])
				}
				want := make([]float64, c.b*c.t*c.nv*c.dv)
				c.reference(st64, 0, c.t, want)
				got := c.run(tb.b, sts, 0, c.t, 64)
				// The values are drawn with standard deviation 1, but a
				// short row's outputs can cancel to near zero (one seed in
				// about a thousand gave 7.6e-5 for the one-token case):
				// their error is measured against at least 1e-2.
				checkCloseMin(t, "out", got, want, 2e-5, 1e-2)
				for r := range c.b {
					checkCloseMin(t, fmt.Sprintf("state[%d]", r), download(t, tb.b, sts[r]), st64[r], 2e-5, 1e-2)
				}
			})
		}
	}
}

// TestGatedDeltaResume checks that running a prefix and then the rest from
// the carried state equals one pass, for splits inside and at chunk edges.
func TestGatedDeltaResume(t *testing.T) {
	rng := newRNG(t)
	for _, tb := range deltaForms(t) {
		for _, split := range []int{1, 30, 64, 100} {
			t.Run(fmt.Sprintf("%s/split%d", tb.name, split), func(t *testing.T) {
				c := newDeltaCase(rng, 2, 130, 2, 4, 32, 16, false)
				one := make([]tensor.Tensor, c.b)
				two := make([]tensor.Tensor, c.b)
				for r := range c.b {
					one[r] = upload(tb.b, c.state[r])
					two[r] = upload(tb.b, c.state[r])
				}
				whole := c.run(tb.b, one, 0, c.t, 64)
				first := c.run(tb.b, two, 0, split, 64)
				second := c.run(tb.b, two, split, c.t, 64)
				w := c.nv * c.dv
				for r := range c.b {
					var joined []float32
					joined = append(joined, first[r*split*w:(r+1)*split*w]...)
					joined = append(joined, second[r*(c.t-split)*w:(r+1)*(c.t-split)*w]...)
					checkClose(t, "resumed output", joined, f64s(whole[r*c.t*w:(r+1)*c.t*w]), 1e-5)
					checkClose(t, "resumed state", download(t, tb.b, two[r]), f64s(download(t, tb.b, one[r])), 1e-5)
				}
			})
		}
	}
}

// TestGatedDeltaChunkSizes checks that the chunk length changes nothing but
// rounding.
func TestGatedDeltaChunkSizes(t *testing.T) {
	rng := newRNG(t)
	b, _ := New(Options{})
	c := newDeltaCase(rng, 1, 100, 1, 2, 16, 16, false)
	var ref []float32
	for _, chunk := range []int{64, 1, 7, 128} {
		sts := []tensor.Tensor{upload(b, c.state[0])}
		got := c.run(b, sts, 0, c.t, chunk)
		if ref == nil {
			ref = got
			continue
		}
		checkClose(t, fmt.Sprintf("chunk %d", chunk), got, f64s(ref), 1e-5)
	}
}

// TestTriSolve checks the forward substitution of the small-head path, the
// vector kernel where the CPU has one and the portable loop, against a plain
// scalar loop: the kernel does the same operations in the same order, so
// must give the same bits; the portable loop may fuse multiply and subtract
// (arm64), so it and the scalar loop are held to the forward error bound of
// substitution against the exact (float64) solution.
func TestTriSolve(t *testing.T) {
	rng := newRNG(t)
	for _, sh := range []struct{ n, w, lda int }{
		{1, 64, 1}, {2, 64, 3}, {17, 64, 20}, {64, 64, 64}, {40, 128, 64}, {9, 48, 9},
	} {
		t.Run(fmt.Sprintf("n%d,w%d", sh.n, sh.w), func(t *testing.T) {
			a := randVec(rng, sh.n*sh.lda, 0.3)
			x0 := randVec(rng, sh.n*sh.w, 1)
			want := append([]float32(nil), x0...)
			for i := 1; i < sh.n; i++ {
				for j := range i {
					for e := range sh.w {
						want[i*sh.w+e] -= float32(a[i*sh.lda+j] * want[j*sh.w+e])
					}
				}
			}
			// The exact solution (float64) and the forward error bound of
			// substitution in float32: each x[i] is within about
			// n·u·m[i] of it, m[i] = |x0[i]| + Σ_j |a[i,j]|·m[j] the
			// magnitude of what it accumulates (u = 2⁻²⁴; a factor 4
			// of room for the fused and unfused orders).
			exact := make([]float64, len(x0))
			mag := make([]float64, len(x0))
			for i := range sh.n {
				for e := range sh.w {
					v, m := float64(x0[i*sh.w+e]), math.Abs(float64(x0[i*sh.w+e]))
					for j := range i {
						aij := float64(a[i*sh.lda+j])
						v -= aij * exact[j*sh.w+e]
						m += math.Abs(aij) * mag[j*sh.w+e]
					}
					exact[i*sh.w+e], mag[i*sh.w+e] = v, m
				}
			}
			bound := func(i int) float64 { return 4 * float64(sh.n+1) * 0x1p-24 * mag[i] }
			for i := range want {
				if d := math.Abs(float64(want[i]) - exact[i]); d > bound(i) {
					t.Fatalf("scalar loop: x[%d] = %v, exact %v: error %.3g over the bound %.3g", i, want[i], exact[i], d, bound(i))
				}
			}
			got := append([]float32(nil), x0...)
			triSolve(got, sh.w, a, sh.lda, sh.n)
			for i := range got {
				if d := math.Abs(float64(got[i]) - exact[i]); d > bound(i) {
					t.Fatalf("triSolve: x[%d] = %v, exact %v: error %.3g over the bound %.3g", i, got[i], exact[i], d, bound(i))
				}
			}
			if haveKernel && sh.w%64 == 0 {
				got = append(got[:0], x0...)
				for c0 := 0; c0 < sh.w; c0 += 64 {
					triSolve64AVX2(&got[c0], sh.w, &a[0], sh.lda, sh.n)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("triSolve64AVX2: x[%d] = %v, want %v bit for bit", i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestDeltaStep runs a few positions of the recurrent form's state pass,
// deltaStep, with each vector loop this CPU has and with deltaStepRef, the
// same steps in plain Go, from the same inputs: they do the same operations
// in the same order, so the state, outputs and reads must agree bit for
// bit. The positions include the first pass (no k: decay and read only) and
// the last (no kn).
func TestDeltaStep(t *testing.T) {
	if !kernelOK {
		t.Skip("no vector loops on this CPU")
	}
	z16OK := haveAVX512
	defer func(z bool) { haveAVX512 = z }(haveAVX512)
	rng := newRNG(t)
	type stepFunc func(st []float32, dk, dv int, k, q, v []float32, beta float32, o, kn []float32, dn float32, kv []float32)
	for _, sh := range []struct{ dk, dv int }{{1, 16}, {5, 32}, {32, 32}, {7, 48}, {128, 128}, {3, 64}} {
		t.Run(fmt.Sprintf("dk%d,dv%d", sh.dk, sh.dv), func(t *testing.T) {
			dk, dv := sh.dk, sh.dv
			st0 := randVec(rng, dk*dv, 0.5)
			const steps = 4
			ks, qs, vs := randVec(rng, steps*dk, 0.3), randVec(rng, steps*dk, 0.3), randVec(rng, steps*dv, 1)
			betas, decays := randVec(rng, steps, 1), make([]float32, steps)
			for i := range decays {
				decays[i] = float32(0.5 + 0.5*rng.Float64())
			}
			// run returns the state, then every output and read, after
			// all positions.
			run := func(step stepFunc) []float32 {
				st := append([]float32(nil), st0...)
				kv := make([]float32, dv)
				var got []float32
				step(st, dk, dv, nil, nil, nil, 0, nil, ks[:dk], decays[0], kv)
				got = append(got, kv...)
				for p := range steps {
					var kn []float32
					dn := float32(1)
					if p+1 < steps {
						kn, dn = ks[(p+1)*dk:(p+2)*dk], decays[p+1]
					}
					o := make([]float32, dv)
					step(st, dk, dv, ks[p*dk:(p+1)*dk], qs[p*dk:(p+1)*dk], vs[p*dv:(p+1)*dv], betas[p], o, kn, dn, kv)
					got = append(append(got, o...), kv...)
				}
				return append(st, got...)
			}
			want := run(deltaStepRef)
			for _, f := range []struct {
				name string
				z16  bool
			}{{"AVX2", false}, {"AVX-512", true}} {
				if f.z16 && (!z16OK || dv%32 != 0) {
					continue
				}
				haveAVX512 = f.z16
				got := run(deltaStep)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: element %d is %v, plain Go loops give %v", f.name, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// deltaStepRef is deltaStep in plain Go: every product is rounded before the
// sum it joins (no fused multiply-add), in the vector loops' order.
func deltaStepRef(st []float32, dk, dv int, k, q, v []float32, beta float32, o, kn []float32, dn float32, kv []float32) {
	delta := make([]float32, dv)
	if k != nil {
		for e := range delta {
			delta[e] = (v[e] - kv[e]) * beta
		}
		clear(o)
	}
	clear(kv)
	for i := range dk {
		s := st[i*dv : (i+1)*dv]
		if k != nil {
			ki, qi := k[i], q[i]
			for e := range s {
				x := s[e] + float32(ki*delta[e])
				o[e] += float32(qi * x)
				s[e] = x
			}
		}
		for e := range s {
			s[e] *= dn
		}
		if kn != nil {
			kni := kn[i]
			for e := range s {
				kv[e] += float32(kni * s[e])
			}
		}
	}
}
