package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// MeasureSgemm measures a plain float32 GEMM of c[m,n] = a[m,k]·b[n,k]ᵀ on
// this backend's GEMM (one cblas_sgemm call with OpenBLAS using the backend's
// thread count; for other BLAS libraries and the pure-Go GEMM, the columns
// split over the backend's goroutines) for at least minDur, and returns its
// rate in GFLOP/s (2·m·n·k per call). It is the yardstick the prefill
// benchmark reports the model against.
//
// The time is cut into windows of at least 20 ms and the fastest window
// counts: other load on the machine only ever slows a window down, so the
// best one is the steadiest estimate of what the machine can do.
func (b *Backend) MeasureSgemm(ctx context.Context, m, n, k int, minDur time.Duration) (gflops float64, err error) {
	if m <= 0 || n <= 0 || k <= 0 {
		return 0, fmt.Errorf("cpu: sgemm shape %d×%d×%d", m, n, k)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, m*k)
	w := make([]float32, n*k)
	c := make([]float32, m*n)
	for i := range a {
		a[i] = rng.Float32() - 0.5
	}
	for i := range w {
		w[i] = rng.Float32() - 0.5
	}
	run := b.plainSgemm(m, n, k, a, w, c)
	run() // warm up: thread pools, page faults
	const window = 20 * time.Millisecond
	flops := 2 * float64(m) * float64(n) * float64(k)
	start := time.Now()
	for {
		ws := time.Now()
		calls := 0
		for calls == 0 || time.Since(ws) < window {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			run()
			calls++
		}
		gflops = max(gflops, flops*float64(calls)/time.Since(ws).Seconds()/1e9)
		if time.Since(start) >= minDur {
			return gflops, nil
		}
	}
}

// plainSgemm returns a function computing c = a·wᵀ with all of the
// backend's threads.
func (b *Backend) plainSgemm(m, n, k int, a, w, c []float32) func() {
	if b.blas != nil && b.blas.setThreads != nil {
		return func() {
			b.blas.setThreads(int32(b.threads))
			b.sgemm(false, true, m, n, k, 1, a, k, w, k, 0, c, n)
			b.blas.setThreads(1)
		}
	}
	return func() {
		step := (n + b.threads - 1) / b.threads
		step = (step + 15) / 16 * 16
		parts := (n + step - 1) / step
		b.parallel(parts, func(p int) {
			n0 := p * step
			n1 := min(n, n0+step)
			b.sgemm(false, true, m, n1-n0, k, 1, a, k, w[n0*k:], k, 0, c[n0:], n)
		})
	}
}
