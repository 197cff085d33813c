package calibrate

import (
	"fmt"
	"io"

	"github.com/startlux/startlux/eval"
)

// Report is what "startlux calibrate" reports (its JSON with --json): the
// held-out figures before and after, the temperatures (and prior) fitted,
// notes, the questions left out and the config written, if any.
type Report struct {
	HeldOut      string                          `json:"held_out"`
	Before       *eval.Report                    `json:"before"`
	After        *eval.Report                    `json:"after"`
	Temperatures map[string]map[string]float64   `json:"temperature_by_type"` // "before" and "after"
	Prior        map[string]map[string][]float64 `json:"position_prior,omitempty"`
	Notes        []string                        `json:"notes"`
	LeftOut      int                             `json:"left_out"`
	Written      string                          `json:"written,omitempty"`
}

// WriteText writes the report for people: the temperatures, the prior, the
// held-out figures before and after, and the notes.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintln(w, "temperature_by_type:")
	for _, t := range eval.Types {
		fmt.Fprintf(w, "  %-7s %.4f → %.4f\n", t, r.Temperatures["before"][string(t)], r.Temperatures["after"][string(t)])
	}
	if len(r.Prior) > 0 {
		fmt.Fprintln(w, "position_prior:")
		for _, t := range eval.Types {
			for _, n := range sortedCounts(r.Prior[string(t)]) {
				fmt.Fprintf(w, "  %-7s %2s options:", t, n)
				for _, p := range r.Prior[string(t)][n] {
					fmt.Fprintf(w, " %.3f", p)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintf(w, "\nheld out (%s):\n%-8s %6s %17s %17s %17s %17s\n", r.HeldOut, "type", "n", "nll", "ece", "accuracy", "recall-std")
	row := func(name string, b, a *eval.Metrics) {
		fmt.Fprintf(w, "%-8s %6d %8.4f→%-8.4f %8.4f→%-8.4f %8.4f→%-8.4f %8.4f→%-8.4f\n", name, a.N,
			b.NLL, a.NLL, b.ECE, a.ECE, b.Accuracy, a.Accuracy, b.PositionRecallStd, a.PositionRecallStd)
	}
	for _, t := range eval.Types {
		if a := r.After.Types[t]; a != nil {
			row(string(t), r.Before.Types[t], a)
		}
	}
	row("overall", r.Before.Overall, r.After.Overall)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Written != "" {
		fmt.Fprintf(w, "wrote %s (the old one is %s%s)\n", r.Written, r.Written, BackupSuffix)
	}
}

func sortedCounts(m map[string][]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	// Numeric order: shorter keys first, then by text.
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && (len(ks[j]) < len(ks[j-1]) || len(ks[j]) == len(ks[j-1]) && ks[j] < ks[j-1]); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}
