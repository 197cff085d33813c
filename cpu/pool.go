package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A forward pass is a few hundred backend calls, each fanning out over the
// backend's threads for tens to hundreds of microseconds. Starting fresh
// goroutines for every call wakes a parked OS thread each time, which takes
// 10–30 µs on a virtual machine: as long as the work itself in the small
// passes of a single request. The pool keeps its helpers spinning for a while
// after each call, so the next call finds them awake, and parks them when the
// backend goes quiet. Both the helpers and a caller waiting for them yield
// (runtime.Gosched) as they spin: without that, spinning goroutines held the
// runtime's processors from the goroutines it had to run and every decide
// benchmark got slower than with no pool at all. Every yield goes through the
// runtime's global run queue, though, so the pool as a whole should yield
// about as often whatever its size: the intervals grow with the number of
// helpers. Measured on a 16-core Xeon, yielding as often per helper as on 2
// cores made a single small request 20% slower (4.8 against 3.9 ms) and a
// cold one 10% slower.

const (
	// poolSpin is how long an idle helper keeps looking for the next job
	// before it parks.
	poolSpin = 200 * time.Microsecond
	// poolIdleExit is how long a parked helper waits before its goroutine
	// ends (the next job starts it again).
	poolIdleExit = 2 * time.Second
	// A spinning helper yields every helperYield×helpers polls, a caller
	// waiting for its helpers every callerYield×helpers (the values that
	// measured best with one helper).
	helperYield = 64
	callerYield = 16
)

// pool runs the tasks of one parallel call at a time on the caller and up
// to len(helpers) helper goroutines.
type pool struct {
	spin, idleExit time.Duration // poolSpin and poolIdleExit; tests shorten them
	helperEvery    int           // polls between a spinning helper's yields
	callerEvery    int           // polls between a waiting caller's yields

	mu      sync.Mutex // held by the parallel call that owns the pool
	gen     atomic.Uint64
	job     atomic.Pointer[poolJob]
	helpers []poolHelper
}

// poolJob is one parallel call: tasks [0, n) of fn, taken in order.
type poolJob struct {
	fn   func(int)
	n    int64
	next atomic.Int64 // the next task to take
	done atomic.Int64 // tasks finished
}

// Helper states.
const (
	helperStopped int32 = iota // no goroutine
	helperAwake                // running a job or spinning for the next one
	helperParked               // blocked on wake
)

// poolHelper is one helper goroutine's state.
type poolHelper struct {
	state atomic.Int32
	wake  chan struct{} // a parked helper's wake-up; capacity 1
}

// newPool returns a pool of helpers helper goroutines, started on first use.
func newPool(helpers int) *pool {
	n := max(1, helpers)
	p := &pool{spin: poolSpin, idleExit: poolIdleExit, helperEvery: helperYield * n, callerEvery: callerYield * n,
		helpers: make([]poolHelper, max(0, helpers))}
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
	}
	return p
}

// work runs tasks of j until none are left to take.
func (j *poolJob) work() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return
		}
		j.fn(int(i))
		j.done.Add(1)
	}
}

// run calls fn(i) for every i in [0, n) on the caller and up to workers−1
// helpers, and returns when all calls have returned. It reports false,
// running nothing, when another call holds the pool.
func (p *pool) run(n, workers int, fn func(int)) bool {
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	j := &poolJob{fn: fn, n: int64(n)}
	p.job.Store(j)
	p.gen.Add(1)
	for i := range p.helpers[:min(workers-1, len(p.helpers))] {
		h := &p.helpers[i]
		switch {
		case h.state.CompareAndSwap(helperParked, helperAwake):
			h.wake <- struct{}{}
		case h.state.CompareAndSwap(helperStopped, helperAwake):
			go p.helper(h)
		}
	}
	j.work()
	for spins := 0; j.done.Load() < j.n; spins++ {
		if spins%p.callerEvery == p.callerEvery-1 {
			runtime.Gosched()
		}
	}
	p.job.Store(nil) // drop the job's closure
	return true
}

// helper is a helper goroutine: it joins each new job, spins for p.spin
// after it, then parks, and ends after p.idleExit parked.
func (p *pool) helper(h *poolHelper) {
	var seen uint64
	var timer *time.Timer
	for {
		if g := p.gen.Load(); g != seen {
			seen = g
			if j := p.job.Load(); j != nil {
				j.work()
			}
			continue
		}
		deadline := time.Now().Add(p.spin)
		for spins := 0; p.gen.Load() == seen; spins++ {
			if spins%64 == 63 && time.Now().After(deadline) {
				break
			}
			if spins%p.helperEvery == p.helperEvery-1 {
				runtime.Gosched()
			}
		}
		if p.gen.Load() != seen {
			continue
		}
		h.state.Store(helperParked)
		if p.gen.Load() != seen {
			// A job came after the check: take the state back, unless
			// its caller already sent the wake-up.
			if !h.state.CompareAndSwap(helperParked, helperAwake) {
				<-h.wake
			}
			continue
		}
		if timer == nil {
			timer = time.NewTimer(p.idleExit)
		} else {
			timer.Reset(p.idleExit)
		}
		select {
		case <-h.wake:
		case <-timer.C:
			if h.state.CompareAndSwap(helperParked, helperStopped) {
				return
			}
			<-h.wake
		}
	}
}
