// Package goldens reads the reference decisions in testdata/goldens for the
// tests of several packages, so each does not parse the file its own way.
package goldens

import (
	"encoding/json"
	"errors"
	"fmt"
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
