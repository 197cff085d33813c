package metal

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/startlux/startlux/tensor"
)

func TestElementwise(t *testing.T) {
	for _, n := range []int{1, 255, 257, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := newPair(t, uint64(n))
			a, b, c := p.vec(n+3, 1), p.vec(n+3, 1), p.vec(n+3, 3)
			// Elements past n must stay as they were.
			dst := p.upload(a)
			src := p.upload(b)
			p.m.Add(dst.m, src.m, n)
			p.c.Add(dst.c, src.c, n)
			p.check("add", dst, 0, 1e-7)

			out := p.poisoned(n)
			g, u := p.upload(c), p.upload(b)
			p.m.SwiGLU(out.m, g.m, u.m, n)
			p.c.SwiGLU(out.c, g.c, u.c, n)
			p.check("swiglu", out, 0, 1e-6)

			x := p.upload(a)
			p.m.SigmoidMul(x.m, g.m, n)
			p.c.SigmoidMul(x.c, g.c, n)
			p.check("sigmoid_mul", x, 0, 1e-6)
		})
	}
}

func TestCopy(t *testing.T) {
	cases := []struct{ dstOff, dstStride, srcOff, srcStride, rows, cols int }{
		{0, 5, 0, 5, 1, 5},
		{3, 100, 7, 70, 9, 65},
		{1, 33, 0, 1, 17, 1},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p := newPair(t, uint64(i))
			dn := c.dstOff + (c.rows-1)*c.dstStride + c.cols + 2
			sn := c.srcOff + (c.rows-1)*c.srcStride + c.cols
			dst, src := p.upload(p.vec(dn, 1)), p.upload(p.vec(sn, 1))
			p.m.Copy(dst.m, c.dstOff, c.dstStride, src.m, c.srcOff, c.srcStride, c.rows, c.cols)
			p.c.Copy(dst.c, c.dstOff, c.dstStride, src.c, c.srcOff, c.srcStride, c.rows, c.cols)
			p.check("copy", dst, 0, 0)
		})
	}
}

// weightForms are the stored forms every weight-reading kernel handles.
var weightForms = []struct {
	name        string
	d           tensor.DType
	bits, group int
}{
	{"f32", tensor.F32, 0, 0},
	{"f16", tensor.F16, 0, 0},
	{"bf16", tensor.BF16, 0, 0},
	{"q4g32_bf16", tensor.BF16, 4, 32},
	{"q3g32_f16", tensor.F16, 3, 32},
	{"q6g64_f32", tensor.F32, 6, 64},
	{"q8g64_bf16", tensor.BF16, 8, 64},
}

func TestEmbed(t *testing.T) {
	for _, f := range weightForms {
		t.Run(f.name, func(t *testing.T) {
			p := newPair(t, 7)
			v, h := 37, 192
			w := p.weight(v, h, f.d, f.bits, f.group)
			ids := []int32{0, 36, 5, 5, 17}
			out := p.poisoned(len(ids) * h)
			p.m.Embed(out.m, w, ids)
			p.c.Embed(out.c, w, ids)
			p.check("embed", out, h, 0)
		})
	}
}

func TestMatMul(t *testing.T) {
	shapes := []struct{ rows, o, in int }{
		{1, 5, 64}, {3, 37, 96}, {8, 64, 64}, {9, 1, 64}, {32, 64, 64}, {33, 65, 128}, {70, 37, 192},
		{64, 96, 64}, {129, 70, 128},
	}
	for _, f := range weightForms {
		for _, s := range shapes {
			in := s.in
			if f.bits == 0 {
				in -= 3 // not a multiple of any tile
			} else {
				in = (in + f.group - 1) / f.group * f.group
			}
			t.Run(fmt.Sprintf("%s/%dx%dx%d", f.name, s.rows, s.o, in), func(t *testing.T) {
				p := newPair(t, uint64(s.rows*1000+s.o))
				w := p.weight(s.o, in, f.d, f.bits, f.group)
				x := p.upload(p.vec(s.rows*in, 1))
				out := p.poisoned(s.rows * s.o)
				p.m.MatMul(out.m, x.m, w, s.rows)
				p.c.MatMul(out.c, x.c, w, s.rows)
				p.check("matmul", out, s.o, 2e-6)
			})
		}
	}
}

func TestRMSNorm(t *testing.T) {
	for _, s := range []struct {
		rows, n int
		shift   float32
		inPlace bool
		d       tensor.DType
	}{
		{1, 1, 1, false, tensor.F32}, {5, 31, 0, false, tensor.BF16}, {9, 64, 1, true, tensor.F16}, {4, 100, 1, false, tensor.F32},
	} {
		t.Run(fmt.Sprintf("%dx%d", s.rows, s.n), func(t *testing.T) {
			p := newPair(t, uint64(s.n))
			w := tensor.FromFloat32("norm", s.d, []int{s.n}, p.vec(s.n, 0.3))
			x := p.upload(p.vec(s.rows*s.n, 2))
			out := x
			if !s.inPlace {
				out = p.poisoned(s.rows * s.n)
			}
			p.m.RMSNorm(out.m, x.m, w, s.rows, s.n, 1e-6, s.shift)
			p.c.RMSNorm(out.c, x.c, w, s.rows, s.n, 1e-6, s.shift)
			p.check("rmsnorm", out, s.n, 1e-6)

			z := p.upload(p.vec(s.rows*s.n, 1))
			x2 := p.upload(p.vec(s.rows*s.n, 2))
			out2 := x2
			if !s.inPlace {
				out2 = p.poisoned(s.rows * s.n)
			}
			p.m.GatedRMSNorm(out2.m, x2.m, z.m, w, s.rows, s.n, 1e-6)
			p.c.GatedRMSNorm(out2.c, x2.c, z.c, w, s.rows, s.n, 1e-6)
			p.check("gated rmsnorm", out2, s.n, 1e-6)
		})
	}
}

func TestRoPE(t *testing.T) {
	for _, s := range []struct{ heads, hd, rd int }{{1, 8, 8}, {3, 32, 8}, {2, 40, 16}, {4, 256, 64}} {
		t.Run(fmt.Sprintf("%dx%d/%d", s.heads, s.hd, s.rd), func(t *testing.T) {
			p := newPair(t, uint64(s.hd))
			pos := []int32{0, 1, 2, 63, 64, 1000, 5000, 32767}
			x := p.upload(p.vec(len(pos)*s.heads*s.hd, 1))
			p.m.RoPE(x.m, pos, s.heads, s.hd, s.rd, 1e7)
			p.c.RoPE(x.c, pos, s.heads, s.hd, s.rd, 1e7)
			p.check("rope", x, s.hd, 1e-5)
		})
	}
}

func TestAttention(t *testing.T) {
	for _, s := range []struct {
		b, t, heads, kv, hd int
		prefix              []int // per row, -1 for none; nil for no prefixes
		lens                []int // per row: real positions (AttnArgs.Len); nil: all
	}{
		{1, 1, 2, 1, 16, nil, nil},
		{2, 5, 4, 2, 32, nil, nil},
		{1, 70, 4, 2, 40, nil, nil},
		{3, 33, 4, 4, 24, []int{0, 31, 31}, nil},
		{2, 9, 6, 2, 256, []int{70, 1}, nil},
		// Padded rows: the queries past each row's length get zeros.
		{3, 40, 4, 2, 32, nil, []int{40, 1, 0}},
		{3, 33, 4, 4, 24, []int{0, 31, 31}, []int{33, 20, 7}},
	} {
		t.Run(fmt.Sprintf("b%d_t%d_h%d_kv%d_d%d_p%v_len%v", s.b, s.t, s.heads, s.kv, s.hd, s.prefix, s.lens), func(t *testing.T) {
			p := newPair(t, uint64(s.t*10+s.hd))
			n := s.b * s.t
			q := p.upload(p.vec(n*s.heads*s.hd, 1))
			k := p.upload(p.vec(n*s.kv*s.hd, 1))
			v := p.upload(p.vec(n*s.kv*s.hd, 1))
			out := p.poisoned(n * s.heads * s.hd)
			am := tensor.AttnArgs{B: s.b, T: s.t, Heads: s.heads, KVHeads: s.kv, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd))), Len: s.lens}
			ac := am
			if s.prefix != nil {
				shared := map[int]tensor.KV{}
				sharedC := map[int]tensor.KV{}
				for _, l := range s.prefix {
					if _, ok := shared[l]; ok || l == 0 {
						continue
					}
					pk, pv := p.upload(p.vec(l*s.kv*s.hd, 1)), p.upload(p.vec(l*s.kv*s.hd, 1))
					shared[l] = tensor.KV{K: pk.m, V: pv.m, Len: l}
					sharedC[l] = tensor.KV{K: pk.c, V: pv.c, Len: l}
				}
				for _, l := range s.prefix {
					am.Prefix = append(am.Prefix, shared[l])
					ac.Prefix = append(ac.Prefix, sharedC[l])
				}
			}
			p.m.Attention(out.m, q.m, k.m, v.m, am)
			p.c.Attention(out.c, q.c, k.c, v.c, ac)
			p.check("attention", out, s.hd, 2e-6)
		})
	}
}

func TestCausalConv(t *testing.T) {
	for _, s := range []struct {
		b, t, d, k int
		state      string // "none", "some", "inplace"
		lens       []int
	}{
		{1, 1, 7, 4, "none", []int{1}},
		{2, 2, 70, 4, "some", []int{2, 1}},
		{2, 17, 33, 4, "some", []int{17, 5}},
		{3, 5, 64, 3, "inplace", []int{0, 5, 4}},
	} {
		t.Run(fmt.Sprintf("b%d_t%d_d%d_k%d_%s", s.b, s.t, s.d, s.k, s.state), func(t *testing.T) {
			p := newPair(t, uint64(s.t*100+s.d))
			x := p.upload(p.vec(s.b*s.t*s.d, 1))
			w := tensor.FromFloat32("conv", tensor.BF16, []int{s.d, 1, s.k}, p.vec(s.d*s.k, 0.5))
			out := p.poisoned(s.b * s.t * s.d)
			am := tensor.ConvArgs{B: s.b, T: s.t, D: s.d, K: s.k, Len: s.lens}
			ac := am
			var news []dual
			sn := (s.k - 1) * s.d
			for row := 0; row < s.b; row++ {
				var st dual
				if s.state != "none" && row != 1 {
					st = p.upload(p.vec(sn, 1))
					am.State = append(am.State, st.m)
					ac.State = append(ac.State, st.c)
				} else if s.state != "none" {
					am.State = append(am.State, nil)
					ac.State = append(ac.State, nil)
				}
				ns := p.poisoned(sn)
				if s.state == "inplace" && row != 1 {
					ns = st
				}
				news = append(news, ns)
				am.NewState = append(am.NewState, ns.m)
				ac.NewState = append(ac.NewState, ns.c)
			}
			p.m.CausalConv(out.m, x.m, w, am)
			p.c.CausalConv(out.c, x.c, w, ac)
			p.check("conv", out, s.d, 1e-6)
			for row, ns := range news {
				p.check(fmt.Sprintf("conv new state %d", row), ns, s.d, 0)
			}
		})
	}
}

func TestGatedDelta(t *testing.T) {
	// Lengths around the chunk (1, 63, 64, 65, 130 positions: one to three
	// chunks, a short last one), several rows, several value heads per key
	// head, dk ≠ dv, value dims that are not whole blocks of 32, the largest
	// dims, and a short chunk (many chunks per row).
	for _, s := range []struct{ b, t, nk, nv, dk, dv, chunk int }{
		{1, 1, 1, 1, 16, 8, 64},
		{2, 5, 2, 4, 16, 24, 64},
		{1, 63, 1, 2, 32, 48, 64},
		{1, 64, 2, 4, 16, 40, 64},
		{3, 65, 1, 3, 24, 70, 64},
		{2, 130, 2, 4, 40, 20, 64},
		{2, 9, 1, 2, 128, 33, 64},
		{1, 70, 1, 1, 128, 128, 64},
		{2, 50, 1, 2, 16, 16, 16},
	} {
		t.Run(fmt.Sprintf("b%d_t%d_%dx%d_%dx%d_c%d", s.b, s.t, s.nk, s.nv, s.dk, s.dv, s.chunk), func(t *testing.T) {
			p := newPair(t, uint64(s.t*100+s.dv))
			n := s.b * s.t
			qkv := p.upload(p.vec(n*(2*s.nk*s.dk+s.nv*s.dv), 1))
			alpha := p.upload(p.vec(n*s.nv, 2))
			beta := p.upload(p.vec(n*s.nv, 2))
			aLog := tensor.FromFloat32("A_log", tensor.F32, []int{s.nv}, p.vec(s.nv, 1))
			dtb := tensor.FromFloat32("dt_bias", tensor.BF16, []int{s.nv}, p.vec(s.nv, 1))
			out := p.poisoned(n * s.nv * s.dv)
			am := tensor.DeltaArgs{B: s.b, T: s.t, NK: s.nk, NV: s.nv, DK: s.dk, DV: s.dv, Chunk: s.chunk}
			ac := am
			var states []dual
			for row := 0; row < s.b; row++ {
				st := p.upload(p.vec(s.nv*s.dk*s.dv, 0.1))
				states = append(states, st)
				am.State = append(am.State, st.m)
				ac.State = append(ac.State, st.c)
			}
			p.m.GatedDelta(out.m, qkv.m, alpha.m, beta.m, aLog, dtb, am)
			p.c.GatedDelta(out.c, qkv.c, alpha.c, beta.c, aLog, dtb, ac)
			// The CPU backend runs the recurrent form where it can, and
			// strong decays make some outputs cancel to ~1e-5 (see the CPU
			// package's TestGatedDelta): errors count against at least 1e-2.
			p.checkMin("delta out", out, s.dv, 2e-5, 1e-2)
			for row, st := range states {
				p.check(fmt.Sprintf("delta state %d", row), st, s.dk*s.dv, 2e-5)
			}
		})
	}
}

// TestGatedDeltaLimits checks that shapes beyond the kernels' threadgroup
// arrays are refused with a message naming the problem.
func TestGatedDeltaLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		a    tensor.DeltaArgs
		want string
	}{
		{"dk", tensor.DeltaArgs{B: 1, T: 1, NK: 1, NV: 1, DK: 129, DV: 8, Chunk: 64}, "key heads of dim 129"},
		{"dv", tensor.DeltaArgs{B: 1, T: 1, NK: 1, NV: 1, DK: 8, DV: 129, Chunk: 64}, "value heads of dim 129"},
		{"chunk", tensor.DeltaArgs{B: 1, T: 1, NK: 1, NV: 1, DK: 8, DV: 8, Chunk: 65}, "chunk 65"},
		{"heads", tensor.DeltaArgs{B: 1, T: 1, NK: 2, NV: 3, DK: 8, DV: 8, Chunk: 64}, "3 value heads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := deviceUnderTest(t)
			x := be.Alloc(1)
			defer be.Free(x)
			w := tensor.FromFloat32("w", tensor.F32, []int{c.a.NV}, make([]float32, c.a.NV))
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, c.want) {
					t.Fatalf("panic %v, want one mentioning %q", r, c.want)
				}
			}()
			be.GatedDelta(x, x, x, x, w, w, c.a)
		})
	}
}

// TestQueueOrder checks the backend's ordering contract with work queued as
// on a GPU: a Write issued after an operation lands after it (through a
// staging copy), a Write before it is seen by it, and Read waits for both.
func TestQueueOrder(t *testing.T) {
	be := deviceUnderTest(t).(*Backend)
	a, b := be.Alloc(70), be.Alloc(70)
	ones, twos, tens := make([]float32, 70), make([]float32, 70), make([]float32, 70)
	for i := range ones {
		ones[i], twos[i], tens[i] = 1, 2, 10
	}
	be.Write(a, 0, ones)
	be.Write(b, 0, twos)
	be.Add(a, b, 70) // a = 3
	if be.drv.idle() {
		t.Fatal("the emulator ran a dispatch before Sync; the queued paths go untested")
	}
	be.Write(a, 5, tens[:7]) // after the add: a[5:12] = 10
	be.Add(a, b, 70)         // a = 5, a[5:12] = 12
	got := make([]float32, 70)
	if err := be.Read(context.Background(), a, 0, got); err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		want := float32(5)
		if i >= 5 && i < 12 {
			want = 12
		}
		if g != want {
			t.Fatalf("a[%d] = %v, want %v (all: %v)", i, g, want, got)
		}
	}
}
