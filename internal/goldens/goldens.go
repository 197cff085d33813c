// Package goldens reads the reference decisions in testdata/goldens for the
// tests of several packages, so each does not parse the file its own way.
package goldens

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// DecideCase is one case of decide-demo.json: a request, kept as raw JSON so
// its key order survives, and the reference probabilities of its answers.
type DecideCase struct {
	Request json.RawMessage `json:"request"`
	Answers map[string]struct {
		Probs []float64 `json:"probs"`
	} `json:"answers"`
}

// DecideDemo reads goldens/decide-demo.json under testdata, the path of the
// repository's testdata directory.
func DecideDemo(testdata string) ([]DecideCase, error) {
	path := filepath.Join(testdata, "goldens", "decide-demo.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Cases []DecideCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(file.Cases) == 0 {
		return nil, errors.New(path + ": no cases")
	}
	return file.Cases, nil
}

// MaxRel returns the largest ‖a−b‖/‖b‖ over the consecutive vectors of
// length n of a and b (one position's hidden state, one row's logits): the
// measure every reference tolerance in testdata is stated in. Different
// lengths and NaN give +Inf, so a tolerance check fails on them.
func MaxRel(a, b []float32, n int) float64 {
	if len(a) != len(b) || (n <= 0 && len(b) > 0) {
		return math.Inf(1)
	}
	worst := 0.0
	for off := 0; off < len(b); off += n {
		var d, s float64
		for i := off; i < off+n && i < len(b); i++ {
			x := float64(a[i]) - float64(b[i])
			d += x * x
			s += float64(b[i]) * float64(b[i])
		}
		r := math.Sqrt(d / max(s, 1e-30))
		if math.IsNaN(r) {
			return math.Inf(1)
		}
		worst = max(worst, r)
	}
	return worst
}
