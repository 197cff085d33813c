package human

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
)

// ProgressPrinter shows a load's progress as the daemon reports it
// (api.LoadProgress): one line redrawn in place on a terminal, at most
// every 100 ms while bytes are read, and one line per phase otherwise (a
// log file). It is safe for concurrent use.
type ProgressPrinter struct {
	w        io.Writer
	terminal bool
	now      func() time.Time

	mu    sync.Mutex // guards last and phase
	last  time.Time  // when the loading line was last drawn
	phase string     // the phase last shown
}

// NewProgressPrinter returns a printer writing to w, which is a terminal
// when terminal is set.
func NewProgressPrinter(w io.Writer, terminal bool) *ProgressPrinter {
	return &ProgressPrinter{w: w, terminal: terminal, now: time.Now}
}

// Show writes what lp says of the load, where it says something new.
func (p *ProgressPrinter) Show(lp api.LoadProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	newPhase := lp.Phase != p.phase
	p.phase = lp.Phase
	switch lp.Phase {
	case api.PhasePulling:
		if newPhase {
			if p.terminal {
				fmt.Fprint(p.w, "\r\033[K")
			}
			fmt.Fprintf(p.w, "startlux: pulling %s into %s (\"startlux status\" shows the progress)\n", lp.Repo, lp.Model)
		}
	case api.StateLoading:
		if p.terminal {
			now := p.now()
			if !newPhase && now.Sub(p.last) < 100*time.Millisecond && lp.Done != lp.Total {
				return
			}
			p.last = now
			fmt.Fprintf(p.w, "\r\033[Kloading %s: %3d%% of %.1f MB", ModelLabel(lp.Model), Percent(lp.Done, lp.Total), float64(lp.Total)/1e6)
		} else if newPhase {
			fmt.Fprintf(p.w, "startlux: loading %s\n", ModelLabel(lp.Model))
		}
	case api.StateWarming:
		if p.terminal {
			fmt.Fprintf(p.w, "\r\033[Kwarming up %s", ModelLabel(lp.Model))
		} else {
			fmt.Fprintf(p.w, "startlux: warming up %s\n", ModelLabel(lp.Model))
		}
	case api.StateReady, api.StateFailed:
		if p.terminal {
			fmt.Fprint(p.w, "\r\033[K")
		}
		if lp.Phase == api.StateReady {
			fmt.Fprintf(p.w, "startlux: ready: %s\n", ModelLabel(lp.Model))
		} else {
			fmt.Fprintf(p.w, "startlux: loading %s failed (\"startlux status\" says why)\n", ModelLabel(lp.Model))
		}
	}
}
