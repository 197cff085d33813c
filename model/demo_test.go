package model

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/startlux/startlux/internal/goldens"
)

// TestDemoLetterLogits holds the trained demo checkpoint to the transformers
// letter logits of every row of decide-demo.json: all rows of a request in
// one batch, each projected onto just its letters' LM-head rows. The trained
// model is well-conditioned, so the bound is the strict 1e-4 per vector.
func TestDemoLetterLogits(t *testing.T) {
	var golden struct {
		Cases []struct {
			Answers map[string]struct {
				Rows []struct {
					IDs          []int32   `json:"ids"`
					LetterLogits []float32 `json:"letter_logits"`
				} `json:"rows"`
			} `json:"answers"`
		} `json:"cases"`
	}
	var dc struct {
		LetterTokenIDs []int `json:"letter_token_ids"`
	}
	for file, v := range map[string]any{"../testdata/goldens/decide-demo.json": &golden, demoDir + "/decision_config.json": &dc} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	m := loadTiny(t, demoDir)
	worst, n := 0.0, 0
	for ci, c := range golden.Cases {
		// Rows with the same number of letters share a head and a batch.
		byWidth := map[int][]Row{}
		want := map[int][][]float32{}
		for _, a := range c.Answers {
			for _, r := range a.Rows {
				k := len(r.LetterLogits)
				byWidth[k] = append(byWidth[k], Row{IDs: r.IDs, Gather: []int{len(r.IDs) - 1}})
				want[k] = append(want[k], r.LetterLogits)
			}
		}
		for k, rows := range byWidth {
			got, err := m.Forward(context.Background(), rows, m.HeadRows(dc.LetterTokenIDs[:k]))
			if err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				r := goldens.MaxRel(got[i], want[k][i], k)
				worst = max(worst, r)
				n++
				if r > 1e-4 {
					t.Errorf("case %d, %d-letter row %d: letter logits %v, want %v (relative error %.2e)", ci, k, i, got[i], want[k][i], r)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d rows checked", n)
	}
	t.Logf("%d rows, worst relative error %.2e", n, worst)
}
