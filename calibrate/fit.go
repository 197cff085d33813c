// Package calibrate fits a jevfmt/1 checkpoint's readout to labelled data:
// one temperature per question type, chosen to minimise the negative
// log-likelihood, and optionally a prior over letter positions estimated
// from cyclic permutations of the options (PriDe, Zheng et al., ICLR 2024)
// that the readout divides out. Everything is refitted from letter logits
// stored from one run of the engine per example; the model never runs per
// candidate temperature.
package calibrate

import (
	"errors"
	"math"
)

// The temperature search brackets log T in [ln MinTemperature,
// ln MaxTemperature] and narrows it by golden sections to TempTolerance.
const (
	MinTemperature = 0.01
	MaxTemperature = 100
	// TempTolerance is the width of the final bracket in log T (a relative
	// error in T of about 1e-9).
	TempTolerance = 1e-9
)

// Scored is one question for the temperature fit: its readout scores before
// the temperature (decide.Config.Logits) and the index of the right option.
type Scored struct {
	A     []float64
	Label int
}

// NLL is the mean negative log-likelihood of the right options at
// temperature T: mean of lse(a/T) − a_label/T, computed stably.
func NLL(items []Scored, T float64) float64 {
	if len(items) == 0 {
		return 0
	}
	var sum float64
	for _, it := range items {
		m := math.Inf(-1)
		for _, a := range it.A {
			m = math.Max(m, a/T)
		}
		var s float64
		for _, a := range it.A {
			s += math.Exp(a/T - m)
		}
		sum += m + math.Log(s) - it.A[it.Label]/T
	}
	return sum / float64(len(items))
}

// FitTemperature returns the temperature that minimises [NLL] over items,
// searched on log T by golden sections over the bracket. NLL is convex in
// 1/T, so it has one minimum along log T and the search finds it; atBound
// reports that it lies at an end of the bracket (data so separable that the
// best T is tiny, or so noisy that it is huge).
func FitTemperature(items []Scored) (T float64, atBound bool, err error) {
	if len(items) == 0 {
		return 0, false, errors.New("no examples to fit a temperature on")
	}
	f := func(u float64) float64 { return NLL(items, math.Exp(u)) }
	lo, hi := math.Log(MinTemperature), math.Log(MaxTemperature)
	invPhi := (math.Sqrt(5) - 1) / 2
	a, b := lo, hi
	c, d := b-invPhi*(b-a), a+invPhi*(b-a)
	fc, fd := f(c), f(d)
	for b-a > TempTolerance {
		if fc <= fd {
			b, d, fd = d, c, fc
			c = b - invPhi*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + invPhi*(b-a)
			fd = f(d)
		}
	}
	u := (a + b) / 2
	return math.Exp(u), u-lo < 1e-6 || hi-u < 1e-6, nil
}

// Prior estimates the position prior of one question type and option count
// from questions run over every cyclic shift of their options: rows[k][s][j]
// is question k's logit of letter j in the row rotated by s. For one
// question, the mean over shifts of the log-probability of letter j is
// log π_j plus terms that are the same for every letter (each option met
// every letter once), so softmax of those means estimates π from that
// question alone; the prior is the mean of the questions' estimates.
func Prior(rows [][][]float32) []float64 {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows[0][0])
	prior := make([]float64, n)
	for _, q := range rows {
		m := make([]float64, n)
		for _, z := range q {
			lse := logSumExp(z)
			for j, x := range z {
				m[j] += (float64(x) - lse) / float64(len(q))
			}
		}
		p := softmax(m)
		for j := range prior {
			prior[j] += p[j] / float64(len(rows))
		}
	}
	return prior
}

func logSumExp(z []float32) float64 {
	m := math.Inf(-1)
	for _, x := range z {
		m = math.Max(m, float64(x))
	}
	var s float64
	for _, x := range z {
		s += math.Exp(float64(x) - m)
	}
	return m + math.Log(s)
}

func softmax(a []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range a {
		m = math.Max(m, x)
	}
	p := make([]float64, len(a))
	var s float64
	for i, x := range a {
		p[i] = math.Exp(x - m)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}
