package daemon

import (
	"sort"
	"sync"
	"time"
)

// The states of the daemon's model, as status reports them.
const (
	StateLoading = "loading" // the first model is being read; decisions wait
	StateWarming = "warming" // it is loaded and running warm-up requests; decisions wait
	StateReady   = "ready"   // decisions are served
	StateFailed  = "failed"  // no model could be loaded; decisions fail with model_load_failed
)

// Status is what the status method returns.
type Status struct {
	// State is loading, warming, ready or failed.
	State string `json:"state"`
	// Error says why the last load failed ("" when it did not).
	Error string `json:"error,omitempty"`
	// Model describes the model being served (or being loaded first).
	Model ModelStatus `json:"model"`
	// Progress is the loading progress of the first model, or of a model
	// being switched to (nil when nothing loads).
	Progress *LoadProgress `json:"progress,omitempty"`
	// SnapshotBytes and SnapshotLimit are the memory held by kept prefix
	// states and its bound.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	SnapshotLimit int64 `json:"snapshot_limit"`
	// Queued counts decisions waiting for the model.
	Queued int `json:"queued"`
	// RequestsServed counts decisions answered (errors excluded).
	RequestsServed uint64 `json:"requests_served"`
	// RequestsFailed counts decisions that ended in an error.
	RequestsFailed uint64 `json:"requests_failed"`
	// LatencyP50MS and LatencyP99MS are percentiles of the time from
	// arrival to answer of the last 1024 decisions.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	// UptimeS is how long the daemon has run, in seconds.
	UptimeS float64 `json:"uptime_s"`
	// PID is the daemon's process id.
	PID int `json:"pid"`
}

// ModelStatus describes a model.
type ModelStatus struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Backend string `json:"backend"`
	// Int8 is whether int8 matmuls are in use (false until int8 support
	// exists).
	Int8 bool `json:"int8"`
}

// LoadProgress reports a load under way.
type LoadProgress struct {
	// Model is the directory being loaded ("" for the embedded demo).
	Model string `json:"model"`
	// Phase is loading or warming (the Progress option is also told ready
	// or failed when a load ends).
	Phase string `json:"phase"`
	// Done and Total are bytes of tensors read so far and in all.
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// latencies keeps the most recent request latencies.
type latencies struct {
	mu   sync.Mutex // guards ring, next, full
	ring [1024]time.Duration
	next int
	full bool
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = d
	l.next++
	if l.next == len(l.ring) {
		l.next, l.full = 0, true
	}
}

// percentiles returns the p50 and p99 in milliseconds (zeros when empty).
func (l *latencies) percentiles() (p50, p99 float64) {
	l.mu.Lock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	s := make([]time.Duration, n)
	copy(s, l.ring[:n])
	l.mu.Unlock()
	if n == 0 {
		return 0, 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return ms(percentile(s, 0.50)), ms(percentile(s, 0.99))
}

// percentile returns the nearest-rank percentile of sorted s.
func percentile(s []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
