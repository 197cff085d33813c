package hub

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/startlux/startlux/human"
)

// Describe says what the pull of p will fetch, in two lines for people.
func (p *Plan) Describe(w io.Writer) {
	fmt.Fprintf(w, "%s is commit %s", p.Ref, human.Commit(p.Commit))
	if p.Repo != p.Ref.Repo {
		fmt.Fprintf(w, " of %s", p.Repo)
	}
	fmt.Fprintf(w, ": %d files, %s", len(p.Files), human.Size(p.Bytes()))
	if n := len(p.Skipped); n > 0 {
		shown := p.Skipped
		if n > 5 {
			shown = append(shown[:4:4], "…")
		}
		fmt.Fprintf(w, " (%d other files left out: %s)", n, strings.Join(shown, ", "))
	}
	fmt.Fprintln(w)
	c := p.Model.Config
	kind := "no decision_config.json (zero-shot, uncalibrated)"
	if p.Format != "" {
		kind = p.Format
	}
	fmt.Fprintf(w, "model: %d layers, hidden size %d, vocabulary %d, %s; %s\n", c.Layers, c.Hidden, c.Vocab, p.Model.Storage(), kind)
}

// Printer writes a pull's progress ([PullOptions].Progress is its
// [Printer.Show]): one updating line on a terminal, plain lines (each
// file's end, and every few seconds) otherwise.
type Printer struct {
	w        io.Writer
	terminal bool
	now      func() time.Time

	started   bool
	filesDone int
	lastLine  time.Time
	lineShown bool
}

// NewPrinter returns a printer writing to w, a terminal or not; now is the
// clock (time.Now).
func NewPrinter(w io.Writer, terminal bool, now func() time.Time) *Printer {
	return &Printer{w: w, terminal: terminal, now: now}
}

// plainEvery spaces the progress lines written when stderr is not a
// terminal.
const plainEvery = 5 * time.Second

// Show writes what p says, as the printer writes.
func (pp *Printer) Show(p Progress) {
	if !pp.started {
		pp.started, pp.lastLine = true, pp.now()
		if p.Resumed > 0 {
			fmt.Fprintf(pp.w, "resuming: %s of %s already downloaded\n", human.Size(p.Resumed), human.Size(p.Total))
		}
	}
	switch {
	case p.Finished:
	case pp.terminal:
		fmt.Fprintf(pp.w, "\r\033[K%s", progressLine(p))
		pp.lineShown = true
	case p.FilesDone > pp.filesDone:
		pp.filesDone, pp.lastLine = p.FilesDone, pp.now()
		fmt.Fprintf(pp.w, "%s: %s, done (%d of %d files)\n", p.File, human.Size(max(p.FileSize, p.FileDone)), p.FilesDone, p.Files)
	case pp.now().Sub(pp.lastLine) >= plainEvery:
		pp.lastLine = pp.now()
		fmt.Fprintln(pp.w, progressLine(p))
	}
}

// End finishes the updating line.
func (pp *Printer) End() {
	if pp.terminal && pp.lineShown {
		fmt.Fprint(pp.w, "\r\033[K")
	}
}

// progressLine is one line of progress: the file, the bytes so far and in
// all, the rate and the time left.
func progressLine(p Progress) string {
	var b strings.Builder
	n := p.FilesDone + 1 // the file's number among the plan's
	if p.FileSize >= 0 && p.FileDone >= p.FileSize {
		n = p.FilesDone // the report that ends it
	}
	fmt.Fprintf(&b, "%s (%d/%d)  %s / %s", p.File, min(n, p.Files), p.Files, human.Size(p.Done), human.Size(p.Total))
	if p.Total > 0 {
		fmt.Fprintf(&b, "  %3.0f%%", 100*float64(p.Done)/float64(p.Total))
	}
	if p.Rate > 0 {
		fmt.Fprintf(&b, "  %s/s", human.Size(int64(p.Rate)))
	}
	if p.ETA > 0 {
		fmt.Fprintf(&b, "  ETA %s", p.ETA.Round(time.Second))
	}
	return b.String()
}

// Describe says what r removed of the model called name from the models
// folder, a line for the model (or the link that stood for it) and one for
// an interrupted pull; nothing when nothing was removed.
func (r Removal) Describe(w io.Writer, name, folder string) {
	switch {
	case r.Link:
		fmt.Fprintf(w, "removed %s from %s (a link to %s, which was left alone)\n", name, folder, r.Target)
	case r.Model:
		what := "not pulled"
		if r.Source != nil {
			what = fmt.Sprintf("%s at commit %s", r.Source.Repo, human.Commit(r.Source.Commit))
		}
		fmt.Fprintf(w, "removed %s from %s (%s, %s)\n", name, folder, what, human.Size(r.Bytes))
	}
	if r.Partial {
		fmt.Fprintf(w, "removed an interrupted pull of %s (%s)\n", name, human.Size(r.PartialBytes))
	}
}
