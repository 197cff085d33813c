package eval

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/startlux/startlux/decide"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestMetricsByHand checks every figure on four questions worked out by
// hand (the sums are in the comments).
func TestMetricsByHand(t *testing.T) {
	recs := []Record{
		{Type: decide.Noul, Probs: []float64{0.7, 0.2, 0.1}, Label: 0}, // right, conf 0.7
		{Type: decide.Noul, Probs: []float64{0.2, 0.5, 0.3}, Label: 2}, // wrong (chose 1), conf 0.5
		{Type: decide.Noul, Probs: []float64{0.1, 0.1, 0.8}, Label: 2}, // right, conf 0.8
		{Type: decide.Choice, Probs: []float64{0.5, 0.5}, Label: 1},    // a tie goes to 0: wrong, conf 0.5
		{Type: decide.Score, Probs: []float64{0, 1, 0}, Label: 0},      // sure and wrong: p(right) = 0
		{Type: decide.Score, Probs: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, // conf 1/3 (the edge of bins 5 and 6)
			Label: 0},
	}
	rep := Compute(recs)
	tests := []struct {
		name string
		m    *Metrics
		want Metrics
	}{
		// noul: NLL = (−ln .7 − ln .3 − ln .8)/3; Brier = (.14 + .78 + .06)/3;
		// ECE = (.3 + .5 + .2)/3, one question per bin; recall at A 1/1, at C
		// 1/2, B never right: std of {1, .5} = .25.
		{"noul", rep.Types[decide.Noul], Metrics{N: 3, Accuracy: 2.0 / 3,
			NLL:   -(math.Log(0.7) + math.Log(0.3) + math.Log(0.8)) / 3,
			Brier: 0.98 / 3, ECE: 1.0 / 3, PositionRecallStd: 0.25}},
		// choice: one tie chosen as A, B right: recall {B: 0}, std 0.
		{"choice", rep.Types[decide.Choice], Metrics{N: 1, Accuracy: 0, NLL: math.Log(2), Brier: 0.5, ECE: 0.5, PositionRecallStd: 0}},
		// score: NLL = (−ln 1e-15 − ln ⅓)/2; Brier = (1 + 1 + 0)/2 + ... the
		// second is (⅔)² + 2(⅓)² = ⅔; ECE = ½|0 − 1| + ½|1 − ⅓|; recall at A
		// 1/2, only position right: std 0.
		{"score", rep.Types[decide.Score], Metrics{N: 2, Accuracy: 0.5,
			NLL:   (-math.Log(1e-15) - math.Log(1.0/3)) / 2,
			Brier: (2 + 2.0/3) / 2, ECE: 0.5*1 + 0.5*(2.0/3), PositionRecallStd: 0}},
		// overall: bins 0.5 (two wrong), 0.7, 0.8, 1 (wrong), ⅓ (right);
		// recall A 2/3 (rows 1, 5, 6: hits 1 and 6), B 0/1, C 1/2.
		{"overall", rep.Overall, Metrics{N: 6, Accuracy: 3.0 / 6,
			NLL:               (-(math.Log(0.7) + math.Log(0.3) + math.Log(0.8)) + math.Log(2) - math.Log(1e-15) - math.Log(1.0/3)) / 6,
			Brier:             (0.98 + 0.5 + 2 + 2.0/3) / 6,
			ECE:               2.0/6*0.5 + 1.0/6*0.3 + 1.0/6*0.2 + 1.0/6*1 + 1.0/6*(2.0/3),
			PositionRecallStd: popStdByHand(2.0/3, 0, 0.5)}},
	}
	for _, tc := range tests {
		m := tc.m
		if m == nil {
			t.Fatalf("%s: no metrics", tc.name)
		}
		w := tc.want
		if m.N != w.N || !near(m.Accuracy, w.Accuracy) || !near(m.NLL, w.NLL) || !near(m.Brier, w.Brier) || !near(m.ECE, w.ECE) || !near(m.PositionRecallStd, w.PositionRecallStd) {
			t.Errorf("%s:\n got n %d acc %.6f nll %.6f brier %.6f ece %.6f std %.6f\nwant n %d acc %.6f nll %.6f brier %.6f ece %.6f std %.6f", tc.name,
				m.N, m.Accuracy, m.NLL, m.Brier, m.ECE, m.PositionRecallStd, w.N, w.Accuracy, w.NLL, w.Brier, w.ECE, w.PositionRecallStd)
		}
	}
	o := rep.Overall
	// Chosen: A by questions 1, 4 (a tie) and 6 (a tie), B by 2 and 5, C by
	// 3; right: A 1, 5, 6; B 4; C 2, 3; both: 1, 6 at A and 3 at C.
	if o.Chosen[0] != 3 || o.Chosen[1] != 2 || o.Chosen[2] != 1 || o.Right[0] != 3 || o.Right[1] != 1 || o.Right[2] != 2 || o.Hits[0] != 2 || o.Hits[2] != 1 {
		t.Errorf("positions: chosen %v right %v hits %v", o.Chosen, o.Right, o.Hits)
	}
	// ⅓ sits on the edge between bins 5 and 6 (1-based): it belongs to bin 5, (4/15, 5/15].
	if b := rep.Types[decide.Score].Bins; b[4].Count != 1 || b[5].Count != 0 || b[14].Count != 1 {
		t.Errorf("score bins %v", b)
	}
}

func popStdByHand(x ...float64) float64 {
	var m float64
	for _, v := range x {
		m += v / float64(len(x))
	}
	var s float64
	for _, v := range x {
		s += (v - m) * (v - m) / float64(len(x))
	}
	return math.Sqrt(s)
}

// TestECEAgainstEdges computes the ECE of random records, many on the bin
// edges k/15, a second way: each bin collects the records with
// lo < conf ≤ hi by comparing with the edges directly.
func TestECEAgainstEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []Record
	for range 3000 {
		n := 2 + rng.IntN(4)
		p := make([]float64, n)
		if rng.IntN(3) == 0 { // the confidence on an edge k/15 ≥ 1/n
			k := int(math.Ceil(15.0/float64(n))) + rng.IntN(15-int(math.Ceil(15.0/float64(n)))+1)
			c := float64(k) / 15
			p[0] = c
			for i := 1; i < n; i++ {
				p[i] = (1 - c) / float64(n-1)
			}
		} else {
			var s float64
			for i := range p {
				p[i] = rng.ExpFloat64()
				s += p[i]
			}
			for i := range p {
				p[i] /= s
			}
		}
		recs = append(recs, Record{Type: decide.Choice, Probs: p, Label: rng.IntN(n)})
	}
	var ref float64
	for k := 1; k <= 15; k++ {
		lo, hi := float64(k-1)/15, float64(k)/15
		var cnt, right int
		var conf float64
		for i := range recs {
			r := &recs[i]
			c := r.Probs[r.Predicted()]
			if c > lo && c <= hi {
				cnt++
				conf += c
				if r.Predicted() == r.Label {
					right++
				}
			}
		}
		if cnt > 0 {
			ref += float64(cnt) / float64(len(recs)) * math.Abs(float64(right)/float64(cnt)-conf/float64(cnt))
		}
	}
	if got := Compute(recs).Overall.ECE; !near(got, ref) {
		t.Errorf("ECE %.12f, by the edges %.12f", got, ref)
	}
}

// TestMetricsEdges: no records, a perfect model, a single position.
func TestMetricsEdges(t *testing.T) {
	empty := Compute(nil)
	if empty.Overall.N != 0 || len(empty.Types) != 0 {
		t.Errorf("empty: %+v", empty)
	}
	js, err := json.Marshal(empty)
	if err != nil {
		t.Fatalf("an empty report must encode: %v", err)
	}
	if string(js) != `{"types":{},"overall":{"n":0,"accuracy":0,"nll":0,"brier":0,"ece":0,"position_recall_std":0}}` {
		t.Errorf("empty JSON %s", js)
	}
	sure := Compute([]Record{{Type: decide.Noul, Probs: []float64{0, 1, 0}, Label: 1}, {Type: decide.Noul, Probs: []float64{1, 0, 0}, Label: 0}})
	m := sure.Overall
	if m.Accuracy != 1 || m.NLL != 0 || m.Brier != 0 || m.ECE != 0 || m.PositionRecallStd != 0 || m.Bins[14].Count != 2 {
		t.Errorf("a perfect model: %+v", m)
	}
	// Always answering A: recall 1 at A, 0 elsewhere.
	biased := Compute([]Record{
		{Type: decide.Choice, Probs: []float64{0.6, 0.4}, Label: 0},
		{Type: decide.Choice, Probs: []float64{0.6, 0.4}, Label: 1},
		{Type: decide.Choice, Probs: []float64{0.6, 0.3, 0.1}, Label: 2},
	})
	if s := biased.Overall.PositionRecallStd; !near(s, popStdByHand(1, 0, 0)) {
		t.Errorf("always A: recall std %v, want %v", s, popStdByHand(1, 0, 0))
	}
}

func TestConfidenceBin(t *testing.T) {
	for _, tc := range []struct {
		c    float64
		want int
	}{{0, 0}, {1e-9, 0}, {1.0 / 15, 0}, {1.0/15 + 1e-12, 1}, {0.5, 7}, {0.8, 11}, {14.0 / 15, 13}, {1, 14}} {
		if got := confidenceBin(tc.c); got != tc.want {
			t.Errorf("confidenceBin(%v) = %d, want %d", tc.c, got, tc.want)
		}
	}
	for k := 1; k <= 15; k++ { // every edge k/15 in bin k (1-based)
		if got := confidenceBin(float64(k) / 15); got != k-1 {
			t.Errorf("edge %d/15 in bin %d", k, got+1)
		}
	}
}
