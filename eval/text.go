package eval

import (
	"fmt"
	"io"
	"time"
)

// WriteText writes the report for people: the metrics table by type and
// overall, and the position table.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%-8s %6s %9s %8s %8s %8s %11s\n", "type", "n", "accuracy", "nll", "brier", "ece", "recall-std")
	row := func(name string, m *Metrics) {
		fmt.Fprintf(w, "%-8s %6d %9.4f %8.4f %8.4f %8.4f %11.4f\n", name, m.N, m.Accuracy, m.NLL, m.Brier, m.ECE, m.PositionRecallStd)
	}
	for _, t := range Types {
		if m := rep.Types[t]; m != nil {
			row(string(t), m)
		}
	}
	row("overall", rep.Overall)
	fmt.Fprintln(w, "\nposition: share of questions choosing it / share whose right option is there / recall there")
	for _, t := range Types {
		m := rep.Types[t]
		if m == nil {
			continue
		}
		fmt.Fprintf(w, "%-8s", t)
		for j := range m.Chosen {
			recall := "-"
			if m.Right[j] > 0 {
				recall = fmt.Sprintf("%.2f", float64(m.Hits[j])/float64(m.Right[j]))
			}
			fmt.Fprintf(w, "  %s %.2f/%.2f/%s", positionName(j), float64(m.Chosen[j])/float64(m.N), float64(m.Right[j])/float64(m.N), recall)
		}
		fmt.Fprintln(w)
	}
}

func positionName(j int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXY"
	if j < len(letters) {
		return letters[j : j+1]
	}
	return fmt.Sprint(j + 1)
}

// ProgressPrinter returns a [RunOptions] Progress that reports on w, what
// leading each line, at most every two seconds, and at the end.
func ProgressPrinter(w io.Writer, what string) func(done, total int) {
	start := time.Now()
	last := start
	return func(done, total int) {
		now := time.Now()
		if done < total && now.Sub(last) < 2*time.Second {
			return
		}
		last = now
		el := now.Sub(start).Seconds()
		fmt.Fprintf(w, "%s: %d/%d examples (%.0f%%), %.1f s, %.1f examples/s\n", what, done, total, 100*float64(done)/float64(total), el, float64(done)/max(el, 1e-9))
	}
}
