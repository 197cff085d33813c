package human

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/startlux/startlux/api"
)

// Commit abbreviates a commit id to 12 digits, as listings and pulls show
// it.
func Commit(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// Models writes a models listing (the models method's, or
// daemon.ListModels') as the table "startlux models" prints: where each
// model came from, its size, how its weights are stored and whether it can
// be loaded and is calibrated; the current one is marked with '*'.
func Models(w io.Writer, list []api.ModelEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSOURCE\tREVISION\tSIZE\tWEIGHTS\tSTATUS")
	for _, m := range list {
		mark := " "
		if m.Current {
			mark = "*"
		}
		source, rev := m.Source, "-"
		switch {
		case m.Embedded:
			source = "(embedded in the binary)"
		case source == "":
			source = m.Path
		default:
			rev = m.Revision
			if m.Commit != "" && m.Commit != m.Revision {
				rev += " (" + Commit(m.Commit) + ")"
			}
		}
		size := "-"
		if m.Bytes > 0 {
			size = Size(m.Bytes)
		}
		weights := m.Quant
		if weights == "" {
			weights = "-"
		}
		status := "calibrated"
		switch {
		case m.Unloadable != "":
			status = m.Unloadable
		case !m.Calibrated:
			status = api.UncalibratedNote
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", mark, m.Name, source, rev, size, weights, status)
	}
	return tw.Flush()
}
