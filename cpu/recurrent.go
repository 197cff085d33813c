package cpu

// The recurrent form of the gated delta rule (qwen35.md §5.4), per row and
// value head, one position at a time:
//
//	S_t = d_t·S_{t−1} + k_t δ_tᵀ,  δ_t = β_t·(v_t − (d_t·S_{t−1})ᵀ k_t),  o_t = S_tᵀ q_t
//
// with d_t = e^{g_t} and the state S stored [dk, dv]. Each position reads
// and writes the state once: the pass that adds k_t δ_tᵀ and reads o_t also
// decays the state by d_{t+1} and accumulates (d_{t+1}·S_t)ᵀ k_{t+1} for the
// next position. For the heads of the Qwen3.5 models (dk = dv = 128, and
// 32 in the demo model) this is less arithmetic than the chunked form,
// whose chunk-sized products do more than the recurrence, and it needs no
// sgemm call (docs/bench-decide.md has the timings).

// recurrentKernel reports whether a vector loop runs deltaStep for heads of
// dv values: AVX2 for dv a multiple of 16, AVX-512 for a multiple of 32.
// Without one GatedDelta runs the chunked form: the recurrence in plain Go
// loops was 1.04–7.6× slower than the chunked form's sgemm calls on the
// demo's and Qwen3.5-0.8B's heads (amd64, vector loops off).
func recurrentKernel(dv int) bool { return haveKernel && dv%16 == 0 }

// deltaRecurrent runs value head j of row over its first n positions in the
// recurrent form, updating the row's state of that head in place and
// writing the outputs. kv is scratch of dv floats. The caller has checked
// recurrentKernel(dv).
func deltaRecurrent(in *deltaInputs, st []float32, row, j, n int, kv []float32) {
	if n == 0 {
		return
	}
	a := in.a
	nk, nv, dk, dv := a.NK, a.NV, a.DK, a.DV
	kh := j / (nv / nk)
	width := 2*nk*dk + nv*dv
	base := row * a.T
	// Position 0's decay and read of the state.
	deltaStep(st, dk, dv, nil, nil, nil, 0, nil, in.kn[(base*nk+kh)*dk:][:dk], expFlush(in.g[base*nv+j]), kv)
	for tok := base; tok < base+n; tok++ {
		var kn []float32
		dn := float32(1)
		if tok+1 < base+n {
			kn, dn = in.kn[((tok+1)*nk+kh)*dk:][:dk], expFlush(in.g[(tok+1)*nv+j])
		}
		deltaStep(st, dk, dv, in.kn[(tok*nk+kh)*dk:][:dk], in.qn[(tok*nk+kh)*dk:][:dk],
			in.qkv[tok*width+2*nk*dk+j*dv:][:dv], in.beta[tok*nv+j], in.out[(tok*nv+j)*dv:][:dv], kn, dn, kv)
	}
}

// deltaStep makes one pass over the state st ([dk, dv]) with the vector loop
// for dv (recurrentKernel). With k nil it only decays the state and reads it
// for the next position: S ← dn·S, kv = Sᵀ kn. Otherwise kv holds (d·S)ᵀ k
// from the previous pass, and it first sets δ = β·(v − kv), adds k δᵀ and
// writes o = Sᵀ q; then it decays by dn and, unless kn is nil, sets
// kv = Sᵀ kn for the next position. The tests hold both loops to a plain Go
// version of these steps, bit for bit (deltaStepRef).
func deltaStep(st []float32, dk, dv int, k, q, v []float32, beta float32, o, kn []float32, dn float32, kv []float32) {
	var kp, qp, vp, op, knp *float32
	if k != nil {
		kp, qp, vp, op = &k[0], &q[0], &v[0], &o[0]
	}
	if kn != nil {
		knp = &kn[0]
	}
	_, _ = st[dk*dv-1], kv[dv-1]
	if haveAVX512 && dv%32 == 0 {
		deltaStepAVX512(&st[0], dk, dv, kp, qp, vp, beta, op, knp, dn, &kv[0])
		return
	}
	deltaStepAVX2(&st[0], dk, dv, kp, qp, vp, beta, op, knp, dn, &kv[0])
}
