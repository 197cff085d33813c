package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPool checks that every task of a parallel call runs exactly once,
// whether the helpers are spinning, parked or stopped when it starts, and
// when calls overlap or nest (the pool then declines and parallel falls back
// to its own goroutines).
func TestPool(t *testing.T) {
	tests := []struct {
		name           string
		spin, idleExit time.Duration
		wait           int32 // helper state to wait for between calls, or -1
	}{
		{"spinning", poolSpin, poolIdleExit, -1},
		{"parked", 0, poolIdleExit, helperParked},
		{"stopped", 0, time.Microsecond, helperStopped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Options{Threads: 4})
			if err != nil {
				t.Fatal(err)
			}
			b.pool.spin, b.pool.idleExit = tc.spin, tc.idleExit
			for call := range 200 {
				n := 2 + call%37 // at least one helper
				counts := make([]atomic.Int32, n)
				b.parallel(n, func(i int) { counts[i].Add(1) })
				for i := range counts {
					if c := counts[i].Load(); c != 1 {
						t.Fatalf("call %d: task %d of %d ran %d times", call, i, n, c)
					}
				}
				if tc.wait >= 0 {
					waitState(t, &b.pool.helpers[0], tc.wait)
				}
			}
		})
	}
	t.Run("overlapping and nested", func(t *testing.T) {
		b, err := New(Options{Threads: 3})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var total atomic.Int64
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					b.parallel(5+g, func(i int) {
						b.parallel(3, func(int) { total.Add(1) })
					})
				}
			}()
		}
		wg.Wait()
		want := int64(0)
		for g := range 4 {
			want += 50 * int64(5+g) * 3
		}
		if got := total.Load(); got != want {
			t.Fatalf("ran %d tasks, want %d", got, want)
		}
	})
}

// waitState waits until h is in state want.
func waitState(t *testing.T, h *poolHelper, want int32) {
	t.Helper()
	for start := time.Now(); h.state.Load() != want; time.Sleep(10 * time.Microsecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("helper state %d, want %d", h.state.Load(), want)
		}
	}
}
