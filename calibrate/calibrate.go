package calibrate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

// Defaults and thresholds of a calibration.
const (
	// MinTypeExamples is the fewest questions of a type its temperature is
	// fitted on; a type with fewer keeps the temperature it had.
	MinTypeExamples = 50
	// MinPriorQuestions is the fewest permuted questions of a type and
	// option count a position prior is estimated from.
	MinPriorQuestions = 8
	// DefaultPriorSample is how many questions of each type and option
	// count are run over every cyclic shift for the prior.
	DefaultPriorSample = 64
	// DefaultFolds is the cross-validation folds when no held-out set is given.
	DefaultFolds = 5
	// Seed fixes the folds and the prior sample, so a calibration repeats.
	Seed = 22
)

// Item is one labelled question with the letter logits the engine read:
// Rows[0] the row in the data's option order, and, for a question sampled
// for the prior, the rows of every other cyclic shift (decide.Answer.Scores).
type Item struct {
	Line  int // the example's line: questions of one line share a fold
	Type  decide.QuestionType
	Rows  [][]float32
	Label int
}

// Items turns an eval run's records into items. Records without scores (a
// run through the daemon, or a question ranked in groups) cannot be refitted
// and are counted in skipped.
func Items(recs []eval.Record) (items []Item, skipped int) {
	for _, r := range recs {
		if len(r.Scores) == 0 {
			skipped++
			continue
		}
		items = append(items, Item{Line: r.Line, Type: r.Type, Rows: r.Scores, Label: r.Label})
	}
	return items, skipped
}

// Options configures [Calibrate].
type Options struct {
	// Folds is the number of cross-validation folds when there is no
	// held-out set (0: DefaultFolds).
	Folds int
	// Debias estimates a new position prior (replacing any the config has)
	// before the temperatures are fitted; otherwise the config's prior, if
	// any, is kept.
	Debias bool
}

// Params are what a fit produces: the config's readout fields.
type Params struct {
	TemperatureByType map[string]float64
	PositionPrior     map[string]map[string][]float64
	// Notes say what was kept and why (too few examples, a bound reached).
	Notes []string
}

// Fit fits the readout to items, starting from cfg. Per question type:
//
//   - with debias, a position prior per option count is estimated from the
//     items run over every shift (no labels needed), and the type keeps it
//     only where, with its own fitted temperature, it lowers the NLL on
//     items (the labels judge a prior they did not shape); without debias
//     the config's prior is kept as it is;
//   - the temperature is the one of least NLL (FitTemperature) for the
//     readout with the chosen prior. A type with fewer than
//     MinTypeExamples items, or whose best temperature lies at the search's
//     bound (the data cannot pin it: perfectly separated, or no signal),
//     keeps the temperature it had.
//
// Notes say what was kept and why.
func Fit(cfg *decide.Config, items []Item, debias bool) *Params {
	p := &Params{TemperatureByType: map[string]float64{}}
	for t, T := range cfg.TemperatureByType {
		p.TemperatureByType[t] = T
	}
	prior := map[string]map[string][]float64{}
	for t, byCount := range cfg.PositionPrior {
		prior[t] = byCount
	}
	estimated := map[string]map[string][]float64{}
	if debias {
		prior = map[string]map[string][]float64{}
		groups := map[string][][][]float32{}
		for _, it := range items {
			if n := len(it.Rows[0]); len(it.Rows) == n {
				k := string(it.Type) + "/" + strconv.Itoa(n)
				groups[k] = append(groups[k], it.Rows)
			}
		}
		for _, k := range sortedKeys(groups) {
			typ, count := splitKey(k)
			if len(groups[k]) < MinPriorQuestions {
				p.Notes = append(p.Notes, fmt.Sprintf("%s with %s options: %d permuted questions, fewer than %d: no position prior", typ, count, len(groups[k]), MinPriorQuestions))
				continue
			}
			if estimated[typ] == nil {
				estimated[typ] = map[string][]float64{}
			}
			estimated[typ][count] = Prior(groups[k])
		}
	}
	for _, typ := range eval.Types {
		t := string(typ)
		oldT := cfg.TemperatureByType[t]
		n := 0
		for _, it := range items {
			if it.Type == typ {
				n++
			}
		}
		if n == 0 {
			continue
		}
		if n < MinTypeExamples {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: %d examples, fewer than %d: keeps temperature %g", typ, n, MinTypeExamples, oldT))
			if estimated[t] != nil {
				p.Notes = append(p.Notes, fmt.Sprintf("%s: too few examples to judge its position prior: not used", typ))
			}
			continue
		}
		type candidate struct {
			prior   map[string][]float64
			T, nll  float64
			atBound bool
		}
		fit := func(pr map[string][]float64) candidate {
			c := *cfg
			c.PositionPrior = map[string]map[string][]float64{t: pr}
			s := scored(&c, items, typ)
			T, atBound, _ := FitTemperature(s)
			if atBound {
				T = oldT
			}
			return candidate{pr, T, NLL(s, T), atBound}
		}
		best := fit(prior[t])
		if est := estimated[t]; est != nil {
			with := fit(est)
			if with.nll < best.nll {
				best = with
			} else {
				p.Notes = append(p.Notes, fmt.Sprintf("%s: the position prior does not lower the NLL on the fitting data (%.4f without, %.4f with): not used", typ, best.nll, with.nll))
			}
		}
		if best.atBound {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: the least NLL lies at the search's bound (T %g or %g): keeps temperature %g", typ, MinTemperature, float64(MaxTemperature), oldT))
		}
		p.TemperatureByType[t] = best.T
		if best.prior != nil {
			if p.PositionPrior == nil {
				p.PositionPrior = map[string]map[string][]float64{}
			}
			p.PositionPrior[t] = best.prior
		}
	}
	// Without debias a type the fit did not judge keeps the config's prior;
	// with it, so does a type without items.
	for t, pr := range cfg.PositionPrior {
		if _, done := p.PositionPrior[t]; !done && (!debias || !hasType(items, decide.QuestionType(t))) {
			if p.PositionPrior == nil {
				p.PositionPrior = map[string]map[string][]float64{}
			}
			p.PositionPrior[t] = pr
		}
	}
	return p
}

func hasType(items []Item, t decide.QuestionType) bool {
	for _, it := range items {
		if it.Type == t {
			return true
		}
	}
	return false
}

// config returns cfg with p's readout fields.
func (p *Params) config(cfg *decide.Config) *decide.Config {
	c := *cfg
	c.TemperatureByType = p.TemperatureByType
	c.PositionPrior = p.PositionPrior
	return &c
}

// scored returns the items of type typ as the readout of c sees them in
// the data's option order.
func scored(c *decide.Config, items []Item, typ decide.QuestionType) []Scored {
	var s []Scored
	for _, it := range items {
		if it.Type == typ {
			s = append(s, Scored{A: c.Logits(typ, it.Rows[:1]), Label: it.Label})
		}
	}
	return s
}

// Records reads items out with config c as the engine would (the data's
// option order, no permutation): the records eval computes metrics of.
func Records(c *decide.Config, items []Item) []eval.Record {
	recs := make([]eval.Record, len(items))
	for i, it := range items {
		a := c.Logits(it.Type, it.Rows[:1])
		recs[i] = eval.Record{Line: it.Line, Type: it.Type, Probs: decide.Softmax(a, c.TemperatureByType[string(it.Type)]), Label: it.Label}
	}
	return recs
}

// Result is a calibration: the parameters fitted on all the training data,
// and the metrics before (the config as it was) and after on data the fit
// did not see: the held-out set, or each fold read with the parameters
// fitted on the other folds.
type Result struct {
	Params        *Params
	Before, After *eval.Report
	// HeldOut describes the held-out data: "holdout" or "K folds".
	HeldOut string
}

// Calibrate fits cfg's readout to train and measures it on holdout, or, when
// holdout is nil, by cross-validation over opts.Folds folds of train (folds
// drawn by line with a fixed seed).
func Calibrate(cfg *decide.Config, train, holdout []Item, opts Options) (*Result, error) {
	if len(train) == 0 {
		return nil, errors.New("no questions to fit on")
	}
	res := &Result{Params: Fit(cfg, train, opts.Debias)}
	if holdout != nil {
		if len(holdout) == 0 {
			return nil, errors.New("the held-out set has no questions to measure on")
		}
		res.HeldOut = "holdout"
		res.Before = eval.Compute(Records(cfg, holdout))
		res.After = eval.Compute(Records(res.Params.config(cfg), holdout))
		return res, nil
	}
	k := opts.Folds
	if k == 0 {
		k = DefaultFolds
	}
	folds := assignFolds(train, k)
	if folds == nil {
		return nil, fmt.Errorf("%d folds need at least %d examples", k, k)
	}
	res.HeldOut = fmt.Sprintf("%d folds", k)
	var before, after []eval.Record
	for f := range k {
		var in, out []Item
		for i, it := range train {
			if folds[i] == f {
				out = append(out, it)
			} else {
				in = append(in, it)
			}
		}
		p := Fit(cfg, in, opts.Debias)
		before = append(before, Records(cfg, out)...)
		after = append(after, Records(p.config(cfg), out)...)
	}
	res.Before, res.After = eval.Compute(before), eval.Compute(after)
	return res, nil
}

// assignFolds gives each item a fold 0..k−1: the distinct lines are
// shuffled with the fixed seed and dealt out in turn. Nil when there are
// fewer lines than folds.
func assignFolds(items []Item, k int) []int {
	if k < 2 {
		return nil
	}
	lineFold := map[int]int{}
	var lines []int
	for _, it := range items {
		if _, ok := lineFold[it.Line]; !ok {
			lineFold[it.Line] = 0
			lines = append(lines, it.Line)
		}
	}
	if len(lines) < k {
		return nil
	}
	rng := rand.New(rand.NewPCG(Seed, uint64(k)))
	rng.Shuffle(len(lines), func(a, b int) { lines[a], lines[b] = lines[b], lines[a] })
	for i, l := range lines {
		lineFold[l] = i % k
	}
	folds := make([]int, len(items))
	for i, it := range items {
		folds[i] = lineFold[it.Line]
	}
	return folds
}

// PriorSample picks, for each question type and option count, up to
// perGroup questions of exs (with a fixed seed) to run over every cyclic
// shift of their options; questions that cannot be permuted (more options
// than decide.MaxPermuteOptions or the model's group) are never picked. The
// result says whether question q of example ex is picked.
func PriorSample(cfg *decide.Config, exs []eval.Example, perGroup int) func(ex, q int) bool {
	type ref struct{ ex, q int }
	groups := map[string][]ref{}
	for i := range exs {
		for qi, l := range exs[i].Labels {
			q := &exs[i].Request.Questions[qi]
			opts, err := q.Options()
			if l < 0 || err != nil || len(opts) > decide.MaxPermuteOptions || len(opts) > cfg.WideChoice.Group {
				continue
			}
			k := string(q.Type) + "/" + strconv.Itoa(len(opts))
			groups[k] = append(groups[k], ref{i, qi})
		}
	}
	picked := map[ref]bool{}
	rng := rand.New(rand.NewPCG(Seed, 0))
	for _, k := range sortedKeys(groups) {
		g := groups[k]
		rng.Shuffle(len(g), func(a, b int) { g[a], g[b] = g[b], g[a] })
		for _, r := range g[:min(perGroup, len(g))] {
			picked[r] = true
		}
	}
	return func(ex, q int) bool { return picked[ref{ex, q}] }
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func splitKey(k string) (typ, count string) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}
