package hub

import (
	"sync"
	"time"
)

// Progress is a snapshot of a download, given to [PullOptions.Progress].
type Progress struct {
	// Repo and Commit name what is pulled.
	Repo, Commit string
	// File is the file being fetched ("" once all are done), FileDone and
	// FileSize its bytes on disk and in all (-1: unknown).
	File               string
	FileDone, FileSize int64
	// Files counts the plan's files, FilesDone those complete.
	Files, FilesDone int
	// Done and Total are the bytes of all files on disk (what an earlier,
	// interrupted pull left included) and in all.
	Done, Total int64
	// Resumed is what was already on disk when this pull started.
	Resumed int64
	// Rate is the transfer rate in bytes per second over the last few
	// seconds (0 until one second of transfer has been seen).
	Rate float64
	// ETA is the time left at Rate (0 when unknown).
	ETA time.Duration
	// Finished is set on the last report, once every file is verified.
	Finished bool
}

// rateWindow is how far back Rate looks.
const rateWindow = 5 * time.Second

// reportEvery spaces progress reports during a transfer.
const reportEvery = 100 * time.Millisecond

// tracker accumulates a download's progress and reports it, at most every
// reportEvery during a transfer and at once on file boundaries.
type tracker struct {
	report func(Progress)
	now    func() time.Time

	mu         sync.Mutex // guards the fields below
	p          Progress
	received   int64 // bytes received by this pull
	samples    []sample
	lastReport time.Time
}

type sample struct {
	t time.Time
	n int64
}

func newTracker(report func(Progress), now func() time.Time, p Progress) *tracker {
	return &tracker{report: report, now: now, p: p}
}

// startFile marks the start of file f with done bytes already on disk.
func (t *tracker) startFile(f File, done int64) {
	t.mu.Lock()
	t.p.File, t.p.FileDone, t.p.FileSize = f.Name, done, f.Size
	t.emitLocked(true)
	t.mu.Unlock()
}

// add records n bytes received into the current file.
func (t *tracker) add(n int64) {
	t.mu.Lock()
	t.p.FileDone += n
	t.p.Done += n
	t.received += n
	t.emitLocked(false)
	t.mu.Unlock()
}

// rewind takes back n bytes of the current file (a server that ignored a
// Range request sends the file again from the start).
func (t *tracker) rewind(n int64) {
	t.mu.Lock()
	t.p.FileDone -= n
	t.p.Done -= n
	t.mu.Unlock()
}

// endFile marks the current file complete.
func (t *tracker) endFile() {
	t.mu.Lock()
	t.p.FilesDone++
	t.emitLocked(true)
	t.mu.Unlock()
}

// finish reports the end of the pull.
func (t *tracker) finish() {
	t.mu.Lock()
	t.p.File, t.p.FileDone, t.p.FileSize = "", 0, 0
	t.p.Finished = true
	t.p.ETA = 0
	t.emitLocked(true)
	t.mu.Unlock()
}

func (t *tracker) emitLocked(force bool) {
	now := t.now()
	t.samples = append(t.samples, sample{now, t.received})
	cut := 0
	for cut < len(t.samples)-1 && now.Sub(t.samples[cut+1].t) >= rateWindow {
		cut++
	}
	t.samples = t.samples[cut:]
	t.p.Rate, t.p.ETA = 0, 0
	if first := t.samples[0]; now.Sub(first.t) >= time.Second {
		t.p.Rate = float64(t.received-first.n) / now.Sub(first.t).Seconds()
		if t.p.Rate > 0 && t.p.Total > t.p.Done {
			t.p.ETA = time.Duration(float64(t.p.Total-t.p.Done) / t.p.Rate * float64(time.Second))
		}
	}
	if t.report == nil || (!force && now.Sub(t.lastReport) < reportEvery) {
		return
	}
	t.lastReport = now
	t.report(t.p)
}
