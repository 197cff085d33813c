package cpu

import (
	"math"
	"slices"

	"github.com/startlux/startlux/tensor"
)

// elemGrain is the smallest slice of an elementwise operation worth a
// goroutine.
const elemGrain = 1 << 14

// Embed gathers rows ids[i] of w into out[i·H : (i+1)·H].
func (b *Backend) Embed(out tensor.Tensor, w *tensor.Weight, ids []int32) {
	h := w.Cols()
	od := data(out)
	b.parallelRange(len(ids), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			weightRow(w, int(ids[i]), od[i*h:(i+1)*h])
		}
	})
}

// Add computes dst[i] += src[i] for i < n.
func (b *Backend) Add(dst, src tensor.Tensor, n int) {
	d, s := data(dst)[:n], data(src)[:n]
	b.parallelRange(n, elemGrain, func(lo, hi int) {
		addVec(d[lo:hi], s[lo:hi])
	})
}

// SwiGLU computes out[i] = silu(gate[i]) · up[i] for i < n.
func (b *Backend) SwiGLU(out, gate, up tensor.Tensor, n int) {
	o, g, u := data(out)[:n], data(gate)[:n], data(up)[:n]
	b.parallelRange(n, elemGrain, func(lo, hi int) {
		var tmp [1024]float32 // out may be gate or up
		for c0 := lo; c0 < hi; c0 += len(tmp) {
			c1 := min(hi, c0+len(tmp))
			oo, uu, sg := o[c0:c1], u[c0:c1], tmp[:c1-c0]
			siluVec(sg, g[c0:c1])
			mulVec(oo, sg, uu)
		}
	})
}

// SigmoidMul computes x[i] *= sigmoid(gate[i]) for i < n.
func (b *Backend) SigmoidMul(x, gate tensor.Tensor, n int) {
	xd, g := data(x)[:n], data(gate)[:n]
	b.parallelRange(n, elemGrain, func(lo, hi int) {
		var tmp [1024]float32
		for c0 := lo; c0 < hi; c0 += len(tmp) {
			xx, gg := xd[c0:min(hi, c0+len(tmp))], g[c0:min(hi, c0+len(tmp))]
			sg := tmp[:len(xx)]
			sigmoidVec(sg, gg)
			mulVec(xx, xx, sg)
		}
	})
}

// RMSNorm computes out[r,:] = x[r,:] / sqrt(mean(x[r,:]²) + eps) · (shift + w).
func (b *Backend) RMSNorm(out, x tensor.Tensor, w *tensor.Weight, rows, n int, eps, shift float32) {
	wv := vec(w)[:n]
	for i := range wv {
		wv[i] += shift
	}
	xd, od := data(x)[:rows*n], data(out)[:rows*n]
	b.parallelRange(rows, max(1, elemGrain/max(n, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, or := xd[r*n:(r+1)*n], od[r*n:(r+1)*n]
			scaleMulVec(or, xr, wv, rmsScale(xr, eps))
		}
	})
}

// GatedRMSNorm computes out[r,:] = w · rms(x[r,:]) · silu(z[r,:]).
func (b *Backend) GatedRMSNorm(out, x, z tensor.Tensor, w *tensor.Weight, rows, n int, eps float32) {
	wv := vec(w)[:n]
	xd, zd, od := data(x)[:rows*n], data(z)[:rows*n], data(out)[:rows*n]
	b.parallelRange(rows, max(1, elemGrain/max(n, 1)), func(lo, hi int) {
		sz := make([]float32, n)
		for r := lo; r < hi; r++ {
			xr, zr, or := xd[r*n:(r+1)*n], zd[r*n:(r+1)*n], od[r*n:(r+1)*n]
			s := rmsScale(xr, eps)
			siluVec(sz, zr)
			// wv·(v·s)·sz, each product rounded in that order.
			scaleMulVec(or, xr, wv, s)
			mulVec(or, or, sz)
		}
	})
}

// rmsScale returns 1/sqrt(mean(x²) + eps), accumulating in float64.
func rmsScale(x []float32, eps float32) float32 {
	ss := sumSq(x)
	return float32(1 / math.Sqrt(float64(float32(ss/float64(len(x))))+float64(eps)))
}

// RoPE rotates the first rd dims of every head of x in rotate-half pairs
// (i, i+rd/2) by pos·inv_freq[i], all in float32 as PyTorch computes it.
// The angles' cos and sin are computed once per position: a batch's rows
// repeat the same positions, so when they span no more values than there
// are tokens, a table over the span serves every token.
func (b *Backend) RoPE(x tensor.Tensor, pos []int32, heads, hd, rd int, theta float32) {
	half := rd / 2
	if len(pos) == 0 || half == 0 {
		return
	}
	inv := ropeInvFreq(rd, theta)
	angles := func(p int32, cos, sin []float32) {
		for i := range half {
			a := float32(p) * inv[i]
			cos[i] = float32(math.Cos(float64(a)))
			sin[i] = float32(math.Sin(float64(a)))
		}
	}
	lo, hi := slices.Min(pos), slices.Max(pos)
	var table []float32 // per position from lo: cos then sin, half each
	if span := int(hi-lo) + 1; span <= len(pos) {
		table = make([]float32, span*2*half)
		b.parallelRange(span, 64, func(a, z int) {
			for j := a; j < z; j++ {
				row := table[j*2*half : (j+1)*2*half]
				angles(lo+int32(j), row[:half], row[half:])
			}
		})
	}
	xd := data(x)[:len(pos)*heads*hd]
	b.parallelRange(len(pos), 8, func(a, z int) {
		cs := make([]float32, 2*half)
		for t := a; t < z; t++ {
			if table != nil {
				cs = table[int(pos[t]-lo)*2*half:][:2*half]
			} else {
				angles(pos[t], cs[:half], cs[half:])
			}
			cos, sin := cs[:half], cs[half:]
			for h := range heads {
				v := xd[(t*heads+h)*hd:]
				x1, x2 := v[:half], v[half:rd]
				for i := range half {
					a, c := x1[i], x2[i]
					x1[i] = a*cos[i] - c*sin[i]
					x2[i] = c*cos[i] + a*sin[i]
				}
			}
		}
	})
}

// ropeInvFreq returns inv_freq[i] = 1 / theta^(float32(2i)/rd) for i < rd/2,
// rounded to float32 at each step as PyTorch's
// 1.0 / (theta ** (arange(0, rd, 2).float() / rd)).
func ropeInvFreq(rd int, theta float32) []float32 {
	inv := make([]float32, rd/2)
	for i := range inv {
		e := float32(2*i) / float32(rd)
		p := float32(math.Pow(float64(theta), float64(e)))
		inv[i] = 1 / p
	}
	return inv
}

// sumSq returns Σ x[i]² in float64.
func sumSq(x []float32) float64 {
	var ss float64
	i := 0
	if haveKernel && len(x) >= 8 {
		i = len(x) &^ 7
		ss = sumSqAVX2(&x[0], i)
	}
	for _, v := range x[i:] {
		ss += float64(v) * float64(v)
	}
	return ss
}
