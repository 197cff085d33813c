package daemon

import (
	"sort"
	"sync"
	"time"
)

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
