package decide

import (
	"math"
	"sort"
)

// Softmax returns softmax(a / T) in float64: the readout's probabilities
// from the scores of [Config.Logits] and a question type's temperature.
// Dividing by T > 0 keeps the order of the scores, so the most probable
// option does not depend on T.
func Softmax(a []float64, T float64) []float64 {
	p := make([]float64, len(a))
	m := math.Inf(-1)
	for i, x := range a {
		p[i] = x / T
		m = math.Max(m, p[i])
	}
	var sum float64
	for i := range p {
		p[i] = math.Exp(p[i] - m)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// ranking runs the wide-choice rule for one question of n options: while
// more than Group options remain they are ranked in groups (sizes as equal as
// possible, the first n mod k one larger), each group keeps its Keep most
// probable options (ties to the earlier) and the rest are eliminated with
// their group probability; the last stage is one row over the survivors.
type ranking struct {
	w      WideChoice
	n      int
	groups [][]int   // option indexes of the rows of the current stage
	final  bool      // the current stage is the last (one row)
	elim   []float64 // probability of each eliminated option, NaN if not eliminated
	probs  []float64 // final probabilities, once done
	nElim  int
}

func newRanking(n int, w WideChoice) *ranking {
	r := &ranking{w: w, n: n, elim: make([]float64, n)}
	for i := range r.elim {
		r.elim[i] = math.NaN()
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	r.stage(all)
	return r
}

// stage sets up the rows that rank the options idx.
func (r *ranking) stage(idx []int) {
	if len(idx) <= r.w.Group {
		r.groups, r.final = [][]int{idx}, true
		return
	}
	k := (len(idx) + r.w.Group - 1) / r.w.Group
	base, extra := len(idx)/k, len(idx)%k
	r.groups, r.final = r.groups[:0], false
	for g, at := 0, 0; g < k; g++ {
		s := base
		if g < extra {
			s++
		}
		r.groups = append(r.groups, idx[at:at+s])
		at += s
	}
}

// done reports whether the ranking has its final probabilities.
func (r *ranking) done() bool { return r.probs != nil }

// advance takes the probabilities of the current stage's rows (one slice
// per group, in order) and moves to the next stage or finishes.
func (r *ranking) advance(ps [][]float64) {
	if r.final {
		r.finish(r.groups[0], ps[0])
		return
	}
	var surv []int
	for gi, g := range r.groups {
		p := ps[gi]
		order := make([]int, len(g))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
		keep := make([]bool, len(g))
		for _, j := range order[:min(r.w.Keep, len(g))] {
			keep[j] = true
		}
		for j, o := range g {
			if keep[j] {
				surv = append(surv, o)
			} else {
				r.elim[o] = p[j]
				r.nElim++
			}
		}
	}
	r.stage(surv)
}

// finish combines the last row's probabilities with the eliminated options:
// survivors get (1 − residual)·p, the eliminated share residual in
// proportion to their group probabilities (equally if those all underflowed).
func (r *ranking) finish(surv []int, p []float64) {
	probs := make([]float64, r.n)
	if r.nElim == 0 {
		for j, o := range surv {
			probs[o] = p[j]
		}
		r.probs = probs
		return
	}
	res := r.w.Residual
	for j, o := range surv {
		probs[o] = (1 - res) * p[j]
	}
	var tot float64
	for _, e := range r.elim {
		if !math.IsNaN(e) {
			tot += e
		}
	}
	for o, e := range r.elim {
		if math.IsNaN(e) {
			continue
		}
		if tot > 0 {
			probs[o] = res * e / tot
		} else {
			probs[o] = res / float64(r.nElim)
		}
	}
	r.probs = probs
}
