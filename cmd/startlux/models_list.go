package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/hub"
)

// printModels writes the models listing as a table: where each model came
// from, its size, how its weights are stored and whether it can be loaded
// and is calibrated; the current one is marked with '*'.
func printModels(stdout, stderr io.Writer, dir string, list []api.ModelEntry) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
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
				rev += " (" + hub.ShortCommit(m.Commit) + ")"
			}
		}
		size := "-"
		if m.Bytes > 0 {
			size = hub.FormatBytes(m.Bytes)
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == 1 {
		fmt.Fprintf(stderr, "no models in %s yet (\"startlux pull REPO\" downloads one from the Hugging Face Hub)\n", dir)
	}
	return nil
}
