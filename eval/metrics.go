package eval

import (
	"math"

	"github.com/startlux/startlux/decide"
)

// ECEBins is the number of equal-width confidence bins of the expected
// calibration error.
const ECEBins = 15

// minProb is the probability a right option of probability below it counts
// as in the log-likelihood, so that one underflowed answer gives a large
// finite loss (−ln 1e-15 ≈ 34.5) instead of an infinite one.
const minProb = 1e-15

// Record is one scored question: its type, the probabilities of its options
// in the order they were shown, and the index of the right one.
type Record struct {
	Line     int    // the example's line in its file
	Question string // the question's name
	Type     decide.QuestionType
	Probs    []float64
	Label    int
	// Scores are the engine's letter logits (decide.Answer.Scores) when the
	// run had them: in-process, for questions of at most wide_choice.group
	// options. Calibration refits from them.
	Scores [][]float32
}

// Predicted returns the index of the most probable option (the earliest on
// ties), the answer the engine gives.
func (r *Record) Predicted() int {
	best := 0
	for i, p := range r.Probs {
		if p > r.Probs[best] {
			best = i
		}
	}
	return best
}

// Bin is one confidence bin of a reliability diagram: the questions whose
// confidence (the largest probability) falls in it, their summed
// confidence and how many were answered right.
type Bin struct {
	Count   int
	SumConf float64
	Correct int
}

// Metrics are the figures of a set of questions. The JSON form carries the
// six summary figures; the bins and per-position counts are for reports and
// plots.
type Metrics struct {
	// N is the number of questions.
	N int `json:"n"`
	// Accuracy is the fraction whose most probable option is the right one.
	Accuracy float64 `json:"accuracy"`
	// NLL is the mean of −ln p(right option), p floored at 1e-15.
	NLL float64 `json:"nll"`
	// Brier is the mean over questions of Σ_i (p_i − y_i)², y the one-hot
	// right option (0 for a sure right answer, 2 for a sure wrong one).
	Brier float64 `json:"brier"`
	// ECE is the expected calibration error over ECEBins equal-width bins of
	// confidence ((k−1)/15, k/15]: Σ_bins (count/N)·|accuracy − mean confidence|.
	ECE float64 `json:"ece"`
	// PositionRecallStd is the population standard deviation, over the
	// option positions that are right at least once, of the recall at each
	// position (how often the right option is chosen when it is there). A
	// model without position bias has the same recall everywhere.
	PositionRecallStd float64 `json:"position_recall_std"`

	// Bins are the reliability diagram's bins.
	Bins [ECEBins]Bin `json:"-"`
	// Chosen, Right and Hits count, per option position (the option's
	// index in the order shown: its letter in a jevfmt/1 row), how often it
	// was chosen, how often it was right, and how often both.
	Chosen, Right, Hits []int `json:"-"`
}

// Report holds the metrics per question type (types without questions are
// left out) and over all questions.
type Report struct {
	Types   map[decide.QuestionType]*Metrics `json:"types"`
	Overall *Metrics                         `json:"overall"`
}

// Types lists the question types in the order reports show them.
var Types = []decide.QuestionType{decide.Noul, decide.Choice, decide.Score}

// Compute computes the report of records.
func Compute(recs []Record) *Report {
	rep := &Report{Types: map[decide.QuestionType]*Metrics{}, Overall: &Metrics{}}
	for i := range recs {
		r := &recs[i]
		m := rep.Types[r.Type]
		if m == nil {
			m = &Metrics{}
			rep.Types[r.Type] = m
		}
		m.add(r)
		rep.Overall.add(r)
	}
	for _, m := range rep.Types {
		m.finish()
	}
	rep.Overall.finish()
	return rep
}

// add accumulates one record; finish turns the sums into means.
func (m *Metrics) add(r *Record) {
	m.N++
	pred := r.Predicted()
	if pred == r.Label {
		m.Accuracy++
	}
	m.NLL -= math.Log(math.Max(r.Probs[r.Label], minProb))
	for i, p := range r.Probs {
		y := 0.0
		if i == r.Label {
			y = 1
		}
		m.Brier += (p - y) * (p - y)
	}
	conf := r.Probs[pred]
	b := &m.Bins[confidenceBin(conf)]
	b.Count++
	b.SumConf += conf
	if pred == r.Label {
		b.Correct++
	}
	grow := func(s []int, n int) []int {
		for len(s) < n {
			s = append(s, 0)
		}
		return s
	}
	n := len(r.Probs)
	m.Chosen, m.Right, m.Hits = grow(m.Chosen, n), grow(m.Right, n), grow(m.Hits, n)
	m.Chosen[pred]++
	m.Right[r.Label]++
	if pred == r.Label {
		m.Hits[pred]++
	}
}

func (m *Metrics) finish() {
	if m.N == 0 {
		return
	}
	n := float64(m.N)
	m.Accuracy /= n
	m.NLL /= n
	m.Brier /= n
	for _, b := range m.Bins {
		if b.Count > 0 {
			m.ECE += float64(b.Count) / n * math.Abs(float64(b.Correct)/float64(b.Count)-b.SumConf/float64(b.Count))
		}
	}
	var recalls []float64
	for j, r := range m.Right {
		if r > 0 {
			recalls = append(recalls, float64(m.Hits[j])/float64(r))
		}
	}
	m.PositionRecallStd = popStd(recalls)
}

// confidenceBin returns the bin ((k−1)/15, k/15] that c falls in, k = 1..15
// as index k−1; 0 goes to the first bin.
func confidenceBin(c float64) int {
	k := int(math.Ceil(c * ECEBins))
	// c·15 may round across an edge: settle it against the edges themselves.
	for k > 1 && c <= float64(k-1)/ECEBins {
		k--
	}
	for k < ECEBins && c > float64(k)/ECEBins {
		k++
	}
	return min(max(k, 1), ECEBins) - 1
}

// popStd is the population standard deviation of x (0 for fewer than two
// values).
func popStd(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	var mean float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return math.Sqrt(ss / float64(len(x)))
}
