package cpu

import (
	"math"

	"github.com/startlux/startlux/tensor"
)

// GatedDelta runs the gated delta rule of a Gated DeltaNet layer. Where a
// vector loop serves the heads (amd64 with AVX2, dv a multiple of 16;
// recurrentKernel) it runs the recurrent form, one task per row and value
// head, one pass over the state per position (recurrent.go); a.Chunk is
// then unused. Otherwise it runs the chunked form of qwen35.md §5.5: per
// row and value head, chunks of a.Chunk positions from the row's first
// position, each with the unit lower-triangular system I+A solved by
// forward substitution and the chunk-sized products done with sgemm. Small
// heads (dk+dv ≤ smallDeltaWidth) run one task per row and key head, whose
// value heads share the chunk's [K; Q] Kᵀ.
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
	pre := b.getScratch(2*n*nk*dk + 2*n*nv)
	defer b.putScratch(pre)
	qn := pre.d[: n*nk*dk : n*nk*dk]
	kn := pre.d[n*nk*dk : 2*n*nk*dk : 2*n*nk*dk]
	bt := pre.d[2*n*nk*dk : 2*n*nk*dk+n*nv : 2*n*nk*dk+n*nv]
	gt := pre.d[2*n*nk*dk+n*nv:]
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

	in := deltaInputs{qn: qn, kn: kn, beta: bt, g: gt, qkv: qkvd, out: od, a: a}
	if !b.chunkedDelta && recurrentKernel(dv) {
		b.parallel(a.B*nv, func(task int) {
			row, j := task/nv, task%nv
			s := b.getScratch(dv)
			defer b.putScratch(s)
			st := data(a.State[row])[j*dk*dv : (j+1)*dk*dv]
			flushSubnormals(func() { deltaRecurrent(&in, st, row, j, a.T, s.d) })
		})
		return
	}
	if dk+dv <= smallDeltaWidth {
		// Small heads: one task per key head, so that the value heads
		// sharing it share the chunk's [K; Q] Kᵀ.
		b.parallel(a.B*nk, func(task int) {
			ws := newDeltaScratch(b, a.Chunk, dk, dv)
			defer b.putScratch(ws.s)
			flushSubnormals(func() { b.deltaKeyHead(ws, &in, task/nk, task%nk) })
		})
		return
	}
	b.parallel(a.B*nv, func(task int) {
		ws := newDeltaScratch(b, a.Chunk, dk, dv)
		defer b.putScratch(ws.s)
		flushSubnormals(func() { b.deltaHead(ws, &in, task/nv, task%nv) })
	})
}

// deltaInputs is what every (row, value head) task of GatedDelta reads:
// normalised q and k per key head, β and g per value head, the raw qkv for
// the values, and the output.
type deltaInputs struct {
	qn, kn  []float32 // [B·T, NK, DK]
	beta, g []float32 // [B·T, NV]
	qkv     []float32 // [B·T, 2·NK·DK + NV·DV]
	out     []float32 // [B·T, NV·DV]
	a       tensor.DeltaArgs
}

// deltaHead runs value head j of one row over its chunks, updating the
// row's state of that head in place.
func (b *Backend) deltaHead(ws *deltaScratch, in *deltaInputs, row, j int) {
	a := in.a
	nk, nv, dk, dv, c := a.NK, a.NV, a.DK, a.DV, a.Chunk
	kh := j / (nv / nk)
	st := data(a.State[row])[j*dk*dv : (j+1)*dk*dv]
	for t0 := 0; t0 < a.T; t0 += c {
		cl := min(c, a.T-t0)
		base := row*a.T + t0
		// Gather the chunk: K, and Q below Kβ in x (filled later).
		for i := range cl {
			tok := base + i
			copy(ws.k[i*dk:(i+1)*dk], in.kn[(tok*nk+kh)*dk:])
			copy(ws.x[(cl+i)*dk:(cl+i+1)*dk], in.qn[(tok*nk+kh)*dk:])
		}
		in.loadValueHead(ws, base, cl, j)
		b.deltaChunk(ws, cl, dk, dv, st, false)
		in.storeOutputs(ws, base, cl, j)
	}
}

// loadValueHead gathers value head j's V, β and g for the cl positions of a
// chunk from token base on.
func (in *deltaInputs) loadValueHead(ws *deltaScratch, base, cl, j int) {
	a := in.a
	dv := a.DV
	width := 2*a.NK*a.DK + a.NV*dv
	vOff := 2*a.NK*a.DK + j*dv
	for i := range cl {
		tok := base + i
		copy(ws.v[i*dv:(i+1)*dv], in.qkv[tok*width+vOff:])
		ws.beta[i] = in.beta[tok*a.NV+j]
		ws.g[i] = in.g[tok*a.NV+j]
	}
}

// storeOutputs writes value head j's outputs of a chunk (deltaChunk's
// ws.y[cl·dv:]) to their tokens, from token base on.
func (in *deltaInputs) storeOutputs(ws *deltaScratch, base, cl, j int) {
	nv, dv := in.a.NV, in.a.DV
	for i := range cl {
		tok := base + i
		copy(in.out[(tok*nv+j)*dv:(tok*nv+j+1)*dv], ws.y[(cl+i)*dv:(cl+i+1)*dv])
	}
}

// smallDeltaWidth is the largest dk+dv for which deltaChunk solves the
// triangular system directly on the right-hand sides; wider heads form
// (I+A)⁻¹ and multiply with sgemm, which is faster there.
const smallDeltaWidth = 128

// deltaKeyHead runs the value heads of key head kh of one row over their
// chunks, computing each chunk's [K; Q] Kᵀ once for all of them.
func (b *Backend) deltaKeyHead(ws *deltaScratch, in *deltaInputs, row, kh int) {
	a := in.a
	nk, nv, dk, dv, c := a.NK, a.NV, a.DK, a.DV, a.Chunk
	r := nv / nk
	for t0 := 0; t0 < a.T; t0 += c {
		cl := min(c, a.T-t0)
		base := row*a.T + t0
		for i := range cl {
			tok := base + i
			copy(ws.x[i*dk:(i+1)*dk], in.kn[(tok*nk+kh)*dk:])
			copy(ws.x[(cl+i)*dk:(cl+i+1)*dk], in.qn[(tok*nk+kh)*dk:])
		}
		copy(ws.k[:cl*dk], ws.x[:cl*dk])
		b.sgemm(false, true, 2*cl, cl, dk, 1, ws.x, dk, ws.k, dk, 0, ws.gram, cl)
		for j := kh * r; j < (kh+1)*r; j++ {
			st := data(a.State[row])[j*dk*dv : (j+1)*dk*dv]
			in.loadValueHead(ws, base, cl, j)
			b.deltaChunk(ws, cl, dk, dv, st, true)
			in.storeOutputs(ws, base, cl, j)
		}
	}
}

// deltaScratch holds one worker's chunk matrices (c = chunk length).
type deltaScratch struct {
	s       scratchBuf
	k       []float32 // [c, dk]: K (left intact by deltaChunk)
	gram    []float32 // [2c, c]: [K; Q] Kᵀ, shared by those value heads
	x       []float32 // [2c, dk]: Kβ (at the end decayed K) over Q
	v       []float32 // [c, dv]
	att     []float32 // [2c, c]: A over (QKᵀ ⊙ D)
	inv     []float32 // [c, c]: (I + A)⁻¹
	z       []float32 // [2c, dv+dk]: [U | W] over [Vβ | eγ Kβ], then over [· | eγ Q]
	y       []float32 // [2c, dv]: W S over eγ Q S, then O
	beta, g []float32 // [c]
	gam     []float32 // [c]: γ
	dec     []float32 // [c]: decays of one row
	egm     []float32 // [c]: e^γ
}

func newDeltaScratch(b *Backend, c, dk, dv int) *deltaScratch {
	s := b.getScratch(5*c + c*dk + 2*c*c + 2*c*dk + c*dv + 2*c*c + c*c + 2*c*(dv+dk) + 2*c*dv)
	ws := &deltaScratch{s: s}
	d := s.d
	take := func(n int) []float32 {
		x := d[:n:n]
		d = d[n:]
		return x
	}
	ws.k, ws.x, ws.v = take(c*dk), take(2*c*dk), take(c*dv)
	ws.gram = take(2 * c * c)
	ws.att, ws.inv = take(2*c*c), take(c*c)
	ws.z, ws.y = take(2*c*(dv+dk)), take(2*c*dv)
	ws.beta, ws.g, ws.gam, ws.egm, ws.dec = take(c), take(c), take(c), take(c), take(c)
	return ws
}

// deltaChunk advances state st ([dk, dv]) over one chunk of cl positions.
// On entry ws.k holds K, ws.x[cl·dk:] Q, ws.v V, ws.beta and ws.g β and g;
// on return ws.y[cl·dv:] holds the chunk's outputs. Five sgemm calls
// (four for small heads, which solve for [U | W] by forward substitution):
//
//	[Kβ; Q] Kᵀ            → A and the intra-chunk scores
//	(I+A)⁻¹ [Vβ | eγ Kβ]  → [U | W]
//	[W; eγ Q] S           → W S and the inter-chunk outputs
//	(QKᵀ ⊙ D) V'          → outputs, with V' = U − W S
//	eγ_last S + (e^(γ_last−γ) K)ᵀ V' → the new state
//
// With shared set, ws.gram[:2cl·cl] already holds [K; Q] Kᵀ (from
// deltaKeyHead) and the first product becomes a row scaling by β.
func (b *Backend) deltaChunk(ws *deltaScratch, cl, dk, dv int, st []float32, shared bool) {
	k, v := ws.k[:cl*dk], ws.v[:cl*dv]
	x := ws.x[:2*cl*dk]
	kb, q := x[:cl*dk], x[cl*dk:]
	gam, egm := ws.gam[:cl], ws.egm[:cl]
	var acc float32
	for i := range cl {
		acc += ws.g[i]
		gam[i] = acc
		egm[i] = expFlush(acc)
	}
	zw := dv + dk
	z := ws.z[:2*cl*zw]
	for i := range cl {
		bi, ei := ws.beta[i], egm[i]
		ki, kbi := k[i*dk:(i+1)*dk], kb[i*dk:(i+1)*dk]
		zi := z[(cl+i)*zw : (cl+i+1)*zw]
		scaleVec(zi[:dv], v[i*dv:(i+1)*dv], bi)
		scaleVec(kbi, ki, bi)
		scaleVec(zi[dv:], kbi, ei)
	}
	att := ws.att[:2*cl*cl]
	if shared {
		gram := ws.gram[:2*cl*cl]
		for i := range cl {
			scaleVec(att[i*cl:i*cl+i], gram[i*cl:i*cl+i], ws.beta[i])
			copy(att[(cl+i)*cl:(cl+i)*cl+i+1], gram[(cl+i)*cl:(cl+i)*cl+i+1])
		}
	} else {
		b.sgemm(false, true, 2*cl, cl, dk, 1, x, dk, k, dk, 0, att, cl)
	}
	// A = strictly_lower(Kβ Kᵀ ⊙ D); P = lower(Q Kᵀ ⊙ D).
	dec := ws.dec[:cl]
	for i := range cl {
		ar := att[i*cl : (i+1)*cl]
		pr := att[(cl+i)*cl : (cl+i+1)*cl]
		gi := gam[i]
		di := dec[:i]
		for jj := range di {
			di[jj] = gi - gam[jj]
		}
		expFlushVec(di, di)
		ar, pr = ar[:i], pr[:i]
		for jj, dij := range di {
			ar[jj] *= dij
			pr[jj] *= dij
		}
		ar, pr = att[i*cl:(i+1)*cl], att[(cl+i)*cl:(cl+i+1)*cl]
		clear(ar[i:])
		clear(pr[i+1:])
	}
	if dk+dv <= smallDeltaWidth {
		// Small heads: solve (I + A) [U | W] = [Vβ | eγ Kβ] by forward
		// substitution on the right-hand sides, X_i = R_i − Σ_{j<i} A_ij X_j,
		// rather than forming the inverse and multiplying by it.
		copy(z[:cl*zw], z[cl*zw:])
		if haveKernel && zw%64 == 0 {
			_, _ = z[cl*zw-1], att[cl*cl-1]
			for c0 := 0; c0 < zw; c0 += 64 {
				triSolve64AVX2(&z[c0], zw, &att[0], cl, cl)
			}
		} else {
			triSolve(z[:cl*zw], zw, att, cl, cl)
		}
	} else {
		// inv = (I + A)⁻¹ by forward substitution: inv_i = e_i − Σ_{j<i} A_ij inv_j
		// (row j of inv is zero beyond column j).
		inv := ws.inv[:cl*cl]
		clear(inv)
		for i := range cl {
			ir := inv[i*cl : i*cl+i+1]
			ir[i] = 1
			ar := att[i*cl : i*cl+i]
			for jj, aij := range ar {
				if aij == 0 {
					continue
				}
				subScaled(ir[:jj+1], inv[jj*cl:jj*cl+jj+1], aij)
			}
		}
		// [U | W] = inv · [Vβ | eγ Kβ] (rows cl..2cl of z) into rows 0..cl.
		b.sgemm(false, false, cl, zw, cl, 1, inv, cl, z[cl*zw:], zw, 0, z, zw)
	}
	// eγ Q below W.
	for i := range cl {
		ei := egm[i]
		scaleVec(z[(cl+i)*zw+dv:(cl+i+1)*zw], q[i*dk:(i+1)*dk], ei)
	}
	// y = [W; eγ Q] · S.
	y := ws.y[:2*cl*dv]
	b.sgemm(false, false, 2*cl, dv, dk, 1, z[dv:], zw, st, dv, 0, y, dv)
	// V' = U − W S, into v.
	for i := range cl {
		u := z[i*zw : i*zw+dv]
		ws := y[i*dv : (i+1)*dv]
		vi := v[i*dv : (i+1)*dv]
		for e := range vi {
			vi[e] = u[e] - ws[e]
		}
	}
	// O = eγ Q S + P V'.
	b.sgemm(false, false, cl, dv, cl, 1, att[cl*cl:], cl, v, dv, 1, y[cl*dv:], dv)
	// S = eγ_last S + (diag(e^(γ_last − γ)) K)ᵀ V'.
	last := gam[cl-1]
	// The decayed K goes where Kβ was (no longer needed), leaving K intact.
	for i := range cl {
		scaleVec(kb[i*dk:(i+1)*dk], k[i*dk:(i+1)*dk], expFlush(last-gam[i]))
	}
	b.sgemm(true, false, dk, dv, cl, 1, kb, dk, v, dv, egm[cl-1], st, dv)
}

// l2norm writes scale · x / sqrt(Σx² + 1e-6) into dst.
func l2norm(dst, x []float32, scale float32) {
	ss := sumSq(x)
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

// triSolve sets, for 1 ≤ i < n, row i of x −= Σ_{j<i} a[i·lda+j] · row j of
// x (rows of x are ldx floats apart): forward substitution with a unit
// lower-triangular matrix whose strictly lower part is a.
func triSolve(x []float32, ldx int, a []float32, lda, n int) {
	for i := 1; i < n; i++ {
		xi := x[i*ldx : (i+1)*ldx]
		for jj, aij := range a[i*lda : i*lda+i] {
			if aij != 0 {
				subScaled(xi, x[jj*ldx:(jj+1)*ldx], aij)
			}
		}
	}
}
