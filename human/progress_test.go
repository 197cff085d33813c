package human

import (
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

// TestProgressPrinter feeds a load's reports, each at a given time, to a
// printer on a terminal and on a log file, and checks what each prints:
// a log gets one line a phase, a terminal one redrawn line that skips
// reports of bytes within 100 ms of the last drawn, but never the last.
func TestProgressPrinter(t *testing.T) {
	type report struct {
		at time.Duration // since the first report
		lp api.LoadProgress
	}
	const clear = "\r\033[K"
	load := func(at time.Duration, done int64) report {
		return report{at, api.LoadProgress{Phase: api.StateLoading, Model: "/m/q", Done: done, Total: 4_000_000}}
	}
	pull := report{0, api.LoadProgress{Phase: api.PhasePulling, Repo: "Qwen/Q", Model: "/m/q", Done: 5}}
	pulled := report{0, api.LoadProgress{Phase: api.PhasePulling, Repo: "Qwen/Q", Model: "/m/q", Done: 9}}
	warm := report{300 * time.Millisecond, api.LoadProgress{Phase: api.StateWarming, Model: "/m/q"}}
	ready := report{400 * time.Millisecond, api.LoadProgress{Phase: api.StateReady, Model: "/m/q"}}
	failed := report{400 * time.Millisecond, api.LoadProgress{Phase: api.StateFailed}}
	for _, c := range []struct {
		name     string
		terminal bool
		reports  []report
		want     string
	}{
		{"log, a pull then a load", false,
			[]report{pull, pulled, load(0, 0), load(200*time.Millisecond, 2_000_000), warm, ready},
			"startlux: pulling Qwen/Q into /m/q (\"startlux status\" shows the progress)\n" +
				"startlux: loading /m/q\n" +
				"startlux: warming up /m/q\n" +
				"startlux: ready: /m/q\n"},
		{"log, the embedded model fails", false,
			[]report{{0, api.LoadProgress{Phase: api.StateLoading, Total: 10}}, failed},
			"startlux: loading the embedded demo model\n" +
				"startlux: loading the embedded demo model failed (\"startlux status\" says why)\n"},
		{"terminal, throttled", true,
			[]report{load(0, 0), load(50*time.Millisecond, 1_000_000), load(150*time.Millisecond, 2_000_000),
				load(160*time.Millisecond, 4_000_000), warm, ready},
			clear + "loading /m/q:   0% of 4.0 MB" +
				clear + "loading /m/q:  50% of 4.0 MB" +
				clear + "loading /m/q: 100% of 4.0 MB" +
				clear + "warming up /m/q" +
				clear + "startlux: ready: /m/q\n"},
		{"terminal, a pull", true,
			[]report{pull, pulled, load(0, 0), failed},
			clear + "startlux: pulling Qwen/Q into /m/q (\"startlux status\" shows the progress)\n" +
				clear + "loading /m/q:   0% of 4.0 MB" +
				clear + "startlux: loading the embedded demo model failed (\"startlux status\" says why)\n"},
	} {
		var b strings.Builder
		p := NewProgressPrinter(&b, c.terminal)
		start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
		for _, r := range c.reports {
			p.now = func() time.Time { return start.Add(r.at) }
			p.Show(r.lp)
		}
		if got := b.String(); got != c.want {
			t.Errorf("%s: printed %q, want %q", c.name, got, c.want)
		}
	}
}
