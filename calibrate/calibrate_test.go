package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

func demoConfigData(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "demo-decision", decide.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func demoConfig(t *testing.T) *decide.Config {
	t.Helper()
	c, err := decide.ParseConfig(demoConfigData(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFitRecoversKnownTemperature builds data whose best temperature is
// known exactly: each group repeats one logit vector z = T*·ln q (plus a
// shift) with the labels in the proportions q, so at T* the readout gives
// every group its empirical label frequencies, the least NLL any
// distribution can reach.
func TestFitRecoversKnownTemperature(t *testing.T) {
	groups := []struct {
		q      []int // label counts; the probabilities are q / Σq
		offset float64
	}{
		{[]int{3, 1}, 0}, {[]int{9, 1}, 4}, {[]int{1, 2, 5}, -3}, {[]int{2, 3, 1, 1, 3}, 10}, {[]int{1, 1, 6}, 0.5},
	}
	for _, Tstar := range []float64{0.3, 1, 1.7, 4.2, 30} {
		var items []Scored
		for _, g := range groups {
			var tot int
			for _, c := range g.q {
				tot += c
			}
			a := make([]float64, len(g.q))
			for i, c := range g.q {
				a[i] = float64(float32(Tstar*math.Log(float64(c)/float64(tot)) + g.offset))
			}
			for i, c := range g.q {
				for range c {
					items = append(items, Scored{A: a, Label: i})
				}
			}
		}
		T, atBound, err := FitTemperature(items)
		if err != nil {
			t.Fatal(err)
		}
		if rel := math.Abs(T-Tstar) / Tstar; rel > 0.01 || atBound {
			t.Errorf("T* %g: fitted %g (relative error %.2g, at bound %v)", Tstar, T, rel, atBound)
		}
		if n := NLL(items, T); n > NLL(items, Tstar*1.01) || n > NLL(items, Tstar/1.01) {
			t.Errorf("T* %g: NLL at the fit %.9f is not below its neighbours", Tstar, n)
		}
	}
	// Separable data: the best T is as small as the bracket allows.
	T, atBound, _ := FitTemperature([]Scored{{A: []float64{1, 0}, Label: 0}, {A: []float64{0, 1}, Label: 1}})
	if !atBound || T > MinTemperature*1.0001 {
		t.Errorf("separable data: T %g, at bound %v", T, atBound)
	}
	if _, _, err := FitTemperature(nil); err == nil {
		t.Error("no items: no error")
	}
}

// TestPriorExact: logits that are a position term plus an option term,
// z_s[j] = ln π_j + u_{(j+s) mod n}, give back π exactly.
func TestPriorExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pi := []float64{0.4, 0.3, 0.2, 0.1}
	var qs [][][]float32
	for range 20 {
		u := make([]float64, 4)
		for i := range u {
			u[i] = rng.NormFloat64() * 3
		}
		var rows [][]float32
		for s := range 4 {
			z := make([]float32, 4)
			for j := range z {
				z[j] = float32(math.Log(pi[j]) + u[(j+s)%4])
			}
			rows = append(rows, z)
		}
		qs = append(qs, rows)
	}
	got := Prior(qs)
	for j := range pi {
		if math.Abs(got[j]-pi[j]) > 1e-6 {
			t.Errorf("prior %v, want %v", got, pi)
			break
		}
	}
}

// biasedItems simulates a model that is over-confident by a factor k and
// prefers letter A: the true probabilities are softmax(u), the labels drawn
// from them, and the letter logits of the row rotated by s are
// k·(u_{(j+s) mod n} + ln π_j). Every permuteEvery-th question has all its
// shifts. It returns the items and the mean NLL of the true probabilities.
func biasedItems(seed uint64, count, permuteEvery int, k float64, pi []float64) ([]Item, float64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	n := len(pi)
	var items []Item
	var trueNLL float64
	for i := range count {
		u := make([]float64, n)
		for j := range u {
			u[j] = rng.NormFloat64() * 1.5
		}
		p := softmax(u)
		x, label := rng.Float64(), n-1
		for j, c := 0, 0.0; j < n; j++ {
			if c += p[j]; x < c {
				label = j
				break
			}
		}
		trueNLL -= math.Log(p[label]) / float64(count)
		shifts := 1
		if i%permuteEvery == 0 {
			shifts = n
		}
		var rows [][]float32
		for s := range shifts {
			z := make([]float32, n)
			for j := range z {
				z[j] = float32(k * (u[(j+s)%n] + math.Log(pi[j])))
			}
			rows = append(rows, z)
		}
		items = append(items, Item{Line: i + 1, Type: decide.Choice, Rows: rows, Label: label})
	}
	return items, trueNLL
}

// TestCalibrateHeldOut: on a simulated over-confident, A-loving model the
// fit lowers the held-out NLL and ECE (cross-validated and on a separate
// held-out set); with the prior it recovers the simulated temperature and
// prior and reaches the NLL of the true probabilities.
func TestCalibrateHeldOut(t *testing.T) {
	cfg := demoConfig(t)
	pi := []float64{0.55, 0.15, 0.15, 0.15}
	const k = 2.5
	train, _ := biasedItems(1, 4000, 10, k, pi)
	hold, trueNLL := biasedItems(2, 4000, 1<<30, k, pi)
	for _, tc := range []struct {
		name    string
		holdout []Item
		debias  bool
	}{{"folds", nil, false}, {"folds debias", nil, true}, {"holdout", hold, false}, {"holdout debias", hold, true}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Calibrate(cfg, train, tc.holdout, Options{Debias: tc.debias})
			if err != nil {
				t.Fatal(err)
			}
			b, a := res.Before.Types[decide.Choice], res.After.Types[decide.Choice]
			if !(a.NLL <= b.NLL) || !(a.ECE < b.ECE) || a.N != b.N {
				t.Errorf("held-out NLL %.4f → %.4f, ECE %.4f → %.4f (n %d, %d)", b.NLL, a.NLL, b.ECE, a.ECE, b.N, a.N)
			}
			T := res.Params.TemperatureByType["choice"]
			if !tc.debias {
				// A temperature alone keeps every answer.
				if a.Accuracy != b.Accuracy {
					t.Errorf("accuracy %.4f → %.4f with a temperature alone", b.Accuracy, a.Accuracy)
				}
				return
			}
			if math.Abs(T-k)/k > 0.05 {
				t.Errorf("with the prior: T %.4f, the simulation's %g", T, k)
			}
			// The estimate is π^k normalised: the prior as the logits see it.
			est := res.Params.PositionPrior["choice"]["4"]
			var z float64
			for _, p := range pi {
				z += math.Pow(p, k)
			}
			for j, p := range pi {
				if math.Abs(est[j]-math.Pow(p, k)/z) > 1e-5 {
					t.Errorf("prior %v, want π^k/Σ = %.5f at %d", est, math.Pow(p, k)/z, j)
				}
			}
			if tc.holdout != nil && math.Abs(a.NLL-trueNLL) > 0.01 {
				t.Errorf("held-out NLL %.4f, the true probabilities' %.4f", a.NLL, trueNLL)
			}
			if !(a.PositionRecallStd < b.PositionRecallStd) {
				t.Errorf("position recall std %.4f → %.4f", b.PositionRecallStd, a.PositionRecallStd)
			}
		})
	}
}

// TestFitKeepsSmallTypes: a type with fewer than MinTypeExamples keeps its
// temperature and a note says so; with enough it is fitted.
func TestFitKeepsSmallTypes(t *testing.T) {
	cfg := demoConfig(t)
	items, _ := biasedItems(5, MinTypeExamples+1, 1<<30, 3, []float64{0.5, 0.5})
	p := Fit(cfg, items[:MinTypeExamples-1], false)
	if p.TemperatureByType["choice"] != cfg.TemperatureByType["choice"] || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], fmt.Sprintf("choice: 49 examples, fewer than 50: keeps temperature %g", cfg.TemperatureByType["choice"])) {
		t.Errorf("49 examples: T %v, notes %q", p.TemperatureByType["choice"], p.Notes)
	}
	p = Fit(cfg, items[:MinTypeExamples], false)
	if p.TemperatureByType["choice"] == cfg.TemperatureByType["choice"] || len(p.Notes) != 0 {
		t.Errorf("50 examples: T %v, notes %q", p.TemperatureByType["choice"], p.Notes)
	}
	if p.TemperatureByType["noul"] != cfg.TemperatureByType["noul"] {
		t.Errorf("a type without examples changed: %v", p.TemperatureByType)
	}
	// Too few permuted questions for a prior.
	items, _ = biasedItems(6, 100, 20, 3, []float64{0.5, 0.3, 0.2})
	p = Fit(cfg, items, true)
	if p.PositionPrior != nil || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "choice with 3 options: 5 permuted questions, fewer than 8") {
		t.Errorf("5 permuted questions: prior %v, notes %q", p.PositionPrior, p.Notes)
	}
}

// TestFitJudgesThePrior: a model that reads the answer off the position
// (letter A is right in the data, and the logits favour A in every shift)
// has a strong estimated prior, but dividing it out raises the NLL: the
// prior is not used. Data that pins no temperature keeps the old one.
func TestFitJudgesThePrior(t *testing.T) {
	cfg := demoConfig(t)
	rng := rand.New(rand.NewPCG(7, 7))
	var items []Item
	for i := range 200 {
		var rows [][]float32
		for range 3 {
			rows = append(rows, []float32{float32(2 + rng.Float64()), float32(rng.Float64()), float32(rng.Float64())})
		}
		label := 0
		if i%5 == 0 {
			label = 1 + i%2
		}
		items = append(items, Item{Line: i, Type: decide.Noul, Rows: rows, Label: label})
	}
	p := Fit(cfg, items, true)
	if p.PositionPrior["noul"] != nil || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "noul: the position prior does not lower the NLL") {
		t.Errorf("prior %v, notes %q", p.PositionPrior, p.Notes)
	}
	// Perfectly separated: the least NLL is at T → 0; the old T stays.
	var sep []Item
	for i := range 60 {
		sep = append(sep, Item{Line: i, Type: decide.Score, Rows: [][]float32{{float32(5 * (1 - i%2)), float32(5 * (i % 2)), -5}}, Label: i % 2})
	}
	p = Fit(cfg, sep, false)
	if p.TemperatureByType["score"] != cfg.TemperatureByType["score"] || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "score: the least NLL lies at the search's bound") {
		t.Errorf("separable: T %v, notes %q", p.TemperatureByType["score"], p.Notes)
	}
}

func TestUpdateConfig(t *testing.T) {
	data := demoConfigData(t)
	p := &Params{
		TemperatureByType: map[string]float64{"noul": 0.5, "choice": 2.25, "score": 1},
		PositionPrior:     map[string]map[string][]float64{"choice": {"2": {0.75, 0.25}}},
	}
	out, err := UpdateConfig(data, p, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decide.ParseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if c.TemperatureByType["choice"] != 2.25 || c.TemperatureByType["noul"] != 0.5 || fmt.Sprint(c.PositionPrior) != "map[choice:map[2:[0.75 0.25]]]" {
		t.Errorf("read back: %v %v", c.TemperatureByType, c.PositionPrior)
	}
	// Every other field is as it was, in its place.
	keys := func(b []byte) []string {
		d := json.NewDecoder(bytes.NewReader(b))
		d.Token()
		var ks []string
		for d.More() {
			k, _ := d.Token()
			var raw json.RawMessage
			d.Decode(&raw)
			ks = append(ks, k.(string))
		}
		return ks
	}
	if got, want := strings.Join(keys(out), ","), strings.Join(keys(data), ",")+",position_prior"; got != want {
		t.Errorf("keys %s, want %s", got, want)
	}
	var before, after map[string]any
	json.Unmarshal(data, &before)
	json.Unmarshal(out, &after)
	for k, v := range before {
		if k != "temperature_by_type" && fmt.Sprint(after[k]) != fmt.Sprint(v) {
			t.Errorf("%s changed: %v → %v", k, v, after[k])
		}
	}
	// Without setPrior an existing prior stays; with setPrior and none it goes.
	again, err := UpdateConfig(out, &Params{TemperatureByType: p.TemperatureByType}, false)
	if err != nil || !bytes.Contains(again, []byte("position_prior")) {
		t.Errorf("kept prior: %v\n%s", err, again)
	}
	gone, err := UpdateConfig(out, &Params{TemperatureByType: p.TemperatureByType}, true)
	if err != nil || bytes.Contains(gone, []byte("position_prior")) {
		t.Errorf("removed prior: %v\n%s", err, gone)
	}
	// A fit that would make a config the engine refuses is an error.
	if _, err := UpdateConfig(data, &Params{TemperatureByType: map[string]float64{"noul": -1, "choice": 1, "score": 1}}, false); err == nil {
		t.Error("a negative temperature was written")
	}

	dir := t.TempDir()
	path := filepath.Join(dir, decide.ConfigFile)
	os.WriteFile(path, data, 0o644)
	if err := WriteConfig(dir, out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, out) {
		t.Error("the written config differs")
	}
	if b, _ := os.ReadFile(path + BackupSuffix); !bytes.Equal(b, data) {
		t.Error("the backup is not the old config")
	}
}

func TestPriorSample(t *testing.T) {
	var lines strings.Builder
	for i := range 30 {
		n := 2 + i%3
		if i == 29 {
			n = 26 // wide: cannot be permuted
		}
		var crit []string
		for j := range n {
			crit = append(crit, fmt.Sprintf(`"o%d": "option %d"`, j, j))
		}
		fmt.Fprintf(&lines, `{"request": {"evidence": %d, "questions": {"q": {"type": "choice", "instructions": "Which?", "criteria": {%s}}}}, "labels": {"q": "o0"}}`+"\n", i, strings.Join(crit, ", "))
	}
	exs, err := eval.Read(strings.NewReader(lines.String()))
	if err != nil {
		t.Fatal(err)
	}
	pick := PriorSample(demoConfig(t), exs, 4)
	count := map[int]int{}
	for i := range exs {
		if pick(i, 0) {
			opts, _ := exs[i].Request.Questions[0].Options()
			count[len(opts)]++
		}
	}
	if fmt.Sprint(count) != "map[2:4 3:4 4:4]" {
		t.Errorf("picked by option count %v, want 4 of each and no wide question", count)
	}
	again := PriorSample(demoConfig(t), exs, 4)
	for i := range exs {
		if pick(i, 0) != again(i, 0) {
			t.Fatal("the sample is not repeatable")
		}
	}
}
