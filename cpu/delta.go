package cpu

import (
	"math"

	"github.com/startlux/startlux/tensor"
)

// GatedDelta runs the gated delta rule of a Gated DeltaNet layer in the
// chunked form of qwen35.md §5.5: per row and value head, chunks of
// a.Chunk positions from the row's first position, each solved with the
// unit lower-triangular (I+A)⁻¹ built by forward substitution and the
// chunk-sized products done with sgemm.
func (b *Backend) GatedDelta(out, qkv, alpha, beta tensor.Tensor, aLog, dtBias *tensor.Weight, a tensor.DeltaArgs) {
	nk, nv, dk, dv := a.NK, a.NV, a.DK, a.DV
	n := a.B * a.T
	width := 2*nk*dk + nv*dv
	qkvd, ad, bd, od := data(qkv), data(alpha), data(beta), data(out)
	aL, dtb := vec(aLog), vec(dtBias)
	negA := make([]float32, nv)
	for j := range negA {
		negA[j] = -float32(math.Exp(float64(aL[j])))
	}

	// Per token: L2-normalised q (scaled by dk^−½) and k of every key head,
	// β and g of every value head.
	qn := make([]float32, n*nk*dk)
	kn := make([]float32, n*nk*dk)
	bt := make([]float32, n*nv)
	gt := make([]float32, n*nv)
	qScale := float32(1 / math.Sqrt(float64(dk)))
	b.parallelRange(n, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			row := qkvd[t*width : (t+1)*width]
			for h := range nk {
				l2norm(qn[(t*nk+h)*dk:(t*nk+h+1)*dk], row[h*dk:(h+1)*dk], qScale)
				l2norm(kn[(t*nk+h)*dk:(t*nk+h+1)*dk], row[(nk+h)*dk:(nk+h+1)*dk], 1)
			}
			for j := range nv {
				bt[t*nv+j] = sigmoid(bd[t*nv+j])
				gt[t*nv+j] = negA[j] * softplus(ad[t*nv+j]+dtb[j])
			}
		}
	})

	r := nv / nk
	c := a.Chunk
	vOff := 2 * nk * dk
	b.parallel(a.B*nv, func(task int) {
		row, j := task/nv, task%nv
		kh := j / r
		st := data(a.State[row])[j*dk*dv : (j+1)*dk*dv]
		ws := newDeltaScratch(b, c, dk, dv)
		defer b.putScratch(ws.s)
		for t0 := 0; t0 < a.T; t0 += c {
			cl := min(c, a.T-t0)
			base := row*a.T + t0
			// Gather the chunk.
			for i := range cl {
				tok := base + i
				copy(ws.q[i*dk:(i+1)*dk], qn[(tok*nk+kh)*dk:])
				copy(ws.k[i*dk:(i+1)*dk], kn[(tok*nk+kh)*dk:])
				copy(ws.v[i*dv:(i+1)*dv], qkvd[tok*width+vOff+j*dv:tok*width+vOff+(j+1)*dv])
				ws.beta[i] = bt[tok*nv+j]
				ws.g[i] = gt[tok*nv+j]
			}
			b.deltaChunk(ws, cl, dk, dv, st)
			for i := range cl {
				tok := base + i
				copy(od[tok*nv*dv+j*dv:tok*nv*dv+(j+1)*dv], ws.o[i*dv:(i+1)*dv])
			}
		}
	})
}

// deltaScratch holds one worker's chunk matrices.
type deltaScratch struct {
	s                 *scratchBuf
	q, k, v, o        []float32 // [c, dk] / [c, dv]
	beta, g, gam, egm []float32 // [c]
	kb, w             []float32 // [c, dk]
	u                 []float32 // [c, dv]
	att, inv          []float32 // [c, c]
}

func newDeltaScratch(b *Backend, c, dk, dv int) *deltaScratch {
	s := b.getScratch(4*c + 4*c*dk + 3*c*dv + 2*c*c)
	ws := &deltaScratch{s: s}
	d := s.d
	take := func(n int) []float32 {
		x := d[:n:n]
		d = d[n:]
		return x
	}
	ws.q, ws.k, ws.kb, ws.w = take(c*dk), take(c*dk), take(c*dk), take(c*dk)
	ws.v, ws.o, ws.u = take(c*dv), take(c*dv), take(c*dv)
	ws.beta, ws.g, ws.gam, ws.egm = take(c), take(c), take(c), take(c)
	ws.att, ws.inv = take(c*c), take(c*c)
	return ws
}

// deltaChunk advances state st ([dk, dv]) over one chunk of cl positions
// whose q, k, v, β and g are in ws, writing the outputs to ws.o.
func (b *Backend) deltaChunk(ws *deltaScratch, cl, dk, dv int, st []float32) {
	q, k, v := ws.q[:cl*dk], ws.k[:cl*dk], ws.v[:cl*dv]
	gam, egm := ws.gam[:cl], ws.egm[:cl]
	var acc float32
	for i := range cl {
		acc += ws.g[i]
		gam[i] = acc
		egm[i] = float32(math.Exp(float64(acc)))
	}
	// kb = diag(β) K, u = diag(β) V.
	kb, u := ws.kb[:cl*dk], ws.u[:cl*dv]
	for i := range cl {
		bi := ws.beta[i]
		for x := range dk {
			kb[i*dk+x] = bi * k[i*dk+x]
		}
		for x := range dv {
			u[i*dv+x] = bi * v[i*dv+x]
		}
	}
	// A = strictly_lower((Kβ Kᵀ) ⊙ D).
	att := ws.att[:cl*cl]
	b.sgemm(false, true, cl, cl, dk, 1, kb, dk, k, dk, 0, att, cl)
	for i := range cl {
		ar := att[i*cl : (i+1)*cl]
		for jj := range i {
			ar[jj] *= float32(math.Exp(float64(gam[i] - gam[jj])))
		}
		clear(ar[i:])
	}
	// inv = (I + A)⁻¹ by forward substitution: inv_i = e_i − Σ_{j<i} A_ij inv_j.
	inv := ws.inv[:cl*cl]
	clear(inv)
	for i := range cl {
		ir := inv[i*cl : (i+1)*cl]
		ir[i] = 1
		for jj := range i {
			aij := att[i*cl+jj]
			if aij == 0 {
				continue
			}
			jr := inv[jj*cl : jj*cl+jj+1]
			for x, vv := range jr {
				ir[x] -= aij * vv
			}
		}
	}
	// U = inv · Vβ (into o, then back to u); W = inv · diag(eγ) Kβ.
	o := ws.o[:cl*dv]
	b.sgemm(false, false, cl, dv, cl, 1, inv, cl, u, dv, 0, o, dv)
	copy(u, o)
	for i := range cl {
		for x := range dk {
			kb[i*dk+x] *= egm[i]
		}
	}
	w := ws.w[:cl*dk]
	b.sgemm(false, false, cl, dk, cl, 1, inv, cl, kb, dk, 0, w, dk)
	// V' = U − W S (in u).
	b.sgemm(false, false, cl, dv, dk, -1, w, dk, st, dv, 1, u, dv)
	// O = ((Q Kᵀ) ⊙ D) V' + diag(eγ) Q S.
	b.sgemm(false, true, cl, cl, dk, 1, q, dk, k, dk, 0, att, cl)
	for i := range cl {
		ar := att[i*cl : (i+1)*cl]
		for jj := 0; jj <= i; jj++ {
			ar[jj] *= float32(math.Exp(float64(gam[i] - gam[jj])))
		}
		clear(ar[i+1:])
	}
	b.sgemm(false, false, cl, dv, cl, 1, att, cl, u, dv, 0, o, dv)
	for i := range cl {
		for x := range dk {
			q[i*dk+x] *= egm[i]
		}
	}
	b.sgemm(false, false, cl, dv, dk, 1, q, dk, st, dv, 1, o, dv)
	// S = eγ_last S + (diag(exp(γ_last − γ)) K)ᵀ V'.
	last := gam[cl-1]
	for i := range cl {
		f := float32(math.Exp(float64(last - gam[i])))
		for x := range dk {
			k[i*dk+x] *= f
		}
	}
	el := egm[cl-1]
	for x := range st {
		st[x] *= el
	}
	b.sgemm(true, false, dk, dv, cl, 1, k, dk, u, dv, 1, st, dv)
}

// l2norm writes scale · x / sqrt(Σx² + 1e-6) into dst.
func l2norm(dst, x []float32, scale float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	f := float32(1/math.Sqrt(float64(float32(ss))+1e-6)) * scale
	for i, v := range x {
		dst[i] = v * f
	}
}

// softplus returns log(1 + e^x), or x above PyTorch's threshold of 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
