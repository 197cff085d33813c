package hub

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/human"
)

// TestPullPrinter feeds the progress printer a download: on a terminal one
// line is rewritten in place; elsewhere it writes a line per finished file
// and one every plainEvery.
func TestPullPrinter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	reports := []Progress{
		{File: "config.json", FileSize: 1000, Files: 2, Total: 11000, Resumed: 500, Done: 500},
		{File: "config.json", FileSize: 1000, FileDone: 1000, Files: 2, FilesDone: 1, Total: 11000, Done: 1000},
		{File: "w.safetensors", FileSize: 10000, Files: 2, FilesDone: 1, Total: 11000, Done: 1000},
		{File: "w.safetensors", FileSize: 10000, FileDone: 4000, Files: 2, FilesDone: 1, Total: 11000, Done: 5000, Rate: 2000, ETA: 3 * time.Second},
		{File: "w.safetensors", FileSize: 10000, FileDone: 10000, Files: 2, FilesDone: 2, Total: 11000, Done: 11000},
		{Files: 2, FilesDone: 2, Total: 11000, Done: 11000, Finished: true},
	}
	for _, terminal := range []bool{false, true} {
		var b bytes.Buffer
		clock := now
		pp := NewPrinter(&b, terminal, func() time.Time { return clock })
		for i, r := range reports {
			if i == 3 {
				clock = clock.Add(plainEvery)
			}
			pp.Show(r)
		}
		pp.End()
		want := "resuming: 500 B of 11.0 kB already downloaded\n" +
			"config.json: 1.00 kB, done (1 of 2 files)\n" +
			"w.safetensors (2/2)  5.00 kB / 11.0 kB   45%  2.00 kB/s  ETA 3s\n" +
			"w.safetensors: 10.0 kB, done (2 of 2 files)\n"
		if terminal {
			want = "resuming: 500 B of 11.0 kB already downloaded\n" +
				"\r\033[Kconfig.json (1/2)  500 B / 11.0 kB    5%" +
				"\r\033[Kconfig.json (1/2)  1.00 kB / 11.0 kB    9%" +
				"\r\033[Kw.safetensors (2/2)  1.00 kB / 11.0 kB    9%" +
				"\r\033[Kw.safetensors (2/2)  5.00 kB / 11.0 kB   45%  2.00 kB/s  ETA 3s" +
				"\r\033[Kw.safetensors (2/2)  11.0 kB / 11.0 kB  100%" +
				"\r\033[K"
		}
		if b.String() != want {
			t.Errorf("terminal %v: printed\n%q\nwant\n%q", terminal, b.String(), want)
		}
	}
}

func TestRemovalDescribe(t *testing.T) {
	src := &Source{Repo: "owner/x", Commit: "0123456789abcdef0123456789abcdef01234567"}
	for _, tc := range []struct {
		name string
		r    Removal
		want string
	}{
		{"nothing", Removal{}, ""},
		{"link", Removal{Model: true, Link: true, Target: "/elsewhere/m"},
			"removed m from /models (a link to /elsewhere/m, which was left alone)\n"},
		{"pulled", Removal{Model: true, Source: src, Bytes: 2_500_000},
			"removed m from /models (owner/x at commit 0123456789ab, " + human.Size(2_500_000) + ")\n"},
		{"not pulled, and a partial pull", Removal{Model: true, Bytes: 10, Partial: true, PartialBytes: 3000},
			"removed m from /models (not pulled, " + human.Size(10) + ")\nremoved an interrupted pull of m (" + human.Size(3000) + ")\n"},
		{"a partial pull only", Removal{Partial: true},
			"removed an interrupted pull of m (" + human.Size(0) + ")\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.r.Describe(&b, "m", "/models")
			if b.String() != tc.want {
				t.Errorf("Describe:\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}
