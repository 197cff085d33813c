// Package cpu is StartLux's CPU compute backend: it implements
// [tensor.Backend] with float32 activations in Go slices, GEMM through the
// system BLAS loaded at run time with purego (OpenBLAS on Linux, Accelerate on
// macOS; STARTLUX_BLAS names another library, or "none") and a parallel
// pure-Go GEMM (with an AVX2 micro-kernel on amd64) where no BLAS is found.
//
// Weights stay in their stored dtype. MatMul widens a tile of weight rows at
// a time (convertTile: BF16, F16, F32 and MLX affine-quantised) into a
// reused float32 scratch and multiplies it with one single-threaded sgemm
// call; the tiles are spread over the backend's goroutines, so no float32
// copy of a whole matrix ever exists and the conversion overlaps the other
// workers' sgemm. OpenBLAS is set to one thread for this.
//
// MatMul over an int8 weight (tensor.I8) runs the W8A8 product of int8.go
// instead: activation rows quantised per row, int32 dot products in an
// AVX-512 VNNI, AVX2, arm64 SDOT or portable kernel chosen from CPUID (or
// STARTLUX_INT8_KERNEL), then the float32 rescale; Int8Kernel names it.
//
// The gated delta rule runs in its recurrent form on amd64 with AVX2 (a
// vector loop makes one pass over a head's state per position: for these
// models' heads less arithmetic than the chunked form, and no sgemm calls),
// and elsewhere in the chunked form of qwen35.md §5.5 with five sgemm calls
// per chunk and head; attention goes through sgemm per block of queries;
// the elementwise operations use AVX2 loops on amd64 that give the same
// bits as their scalar Go versions.
//
// Every operation runs synchronously on the calling goroutine, which fans
// its work out to the backend's helper goroutines (see pool.go: they spin
// briefly between operations, so a pass of a few hundred short operations
// does not wake a parked thread for each), so Read and Sync only copy or
// return.
//
// BenchmarkPrefill08B runs the operations of a Qwen3.5-0.8B 512-token
// prefill and reports tokens/s and the fraction of MeasureSgemm's rate:
//
//	go test ./cpu -run X -bench Prefill08B -benchtime 3x -cpu 2
package cpu

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/startlux/startlux/internal/bufpool"
	"github.com/startlux/startlux/tensor"
)

// Options configures a Backend.
type Options struct {
	// Threads is the number of goroutines an operation fans out to;
	// 0 means runtime.GOMAXPROCS(0).
	Threads int
	// NoBLAS forces the pure-Go GEMM even where a system BLAS is found.
	NoBLAS bool
	// Int8Kernel names the kernel of MatMul over int8 weights, as the
	// STARTLUX_INT8_KERNEL environment variable does ("avx512vnni", "avx2",
	// "sdot", "go"); empty means that variable, and where it is unset too,
	// the best kernel this CPU runs (see int8.go).
	Int8Kernel string
	// PoolLimit bounds the bytes of freed tensors and scratch buffers kept
	// for reuse (0: bufpool.DefaultLimit, < 0: none kept); see
	// [Backend.SetPoolLimit].
	PoolLimit int64
}

// Backend is the CPU implementation of [tensor.Backend].
type Backend struct {
	threads int
	blas    *blasLib // nil: pure-Go GEMM
	name    string

	// tileRows × tileCols bounds the weight tile MatMul widens at a time
	// (defaultTileRows, defaultTileCols; tests shrink them).
	tileRows, tileCols int

	// foldPrefix is the longest attention prefix that joins its row's
	// blocks (the constant foldPrefix; tests change it).
	foldPrefix int

	// chunkedDelta makes GatedDelta run the chunked form even where the
	// recurrent one could run (tests set it to compare the two).
	chunkedDelta bool

	// int8 is the kernel of MatMul over int8 weights.
	int8 *int8Kernel
	// int8Scratch holds *int8Scratch (a call's quantised activations),
	// int8Tasks *int8Task (a worker's accumulators); reused across calls.
	int8Scratch, int8Tasks sync.Pool

	// mem keeps the memory of freed tensors and of released scratch
	// buffers for reuse, up to its limit in bytes (PoolStats,
	// SetPoolLimit): a forward pass allocates the same shapes layer after
	// layer and pass after pass.
	mem *bufpool.Pool[[]float32]

	pool *pool // helper goroutines for parallel
}

var _ tensor.Backend = (*Backend)(nil)

// maxBLASCallers bounds the workers of a backend that calls a system BLAS.
const maxBLASCallers = 64

// New returns a CPU backend. It loads the system BLAS unless opts.NoBLAS is
// set; failing to find one is not an error (the backend then names itself
// "cpu-go"). An int8 kernel choice (opts.Int8Kernel or STARTLUX_INT8_KERNEL)
// that is unknown or that this CPU cannot run is an error naming the choices.
func New(opts Options) (*Backend, error) {
	if opts.Threads < 0 {
		return nil, fmt.Errorf("cpu: negative thread count %d", opts.Threads)
	}
	b := &Backend{threads: opts.Threads, tileRows: defaultTileRows, tileCols: defaultTileCols, foldPrefix: foldPrefix}
	choice, from := int8Choice(opts)
	k, err := chooseInt8(choice)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", from, err)
	}
	b.int8 = k
	if b.threads == 0 {
		b.threads = runtime.GOMAXPROCS(0)
	}
	if !opts.NoBLAS {
		b.blas = systemBLAS()
	}
	if b.blas != nil {
		// Each worker makes its own BLAS calls; OpenBLAS builds serve a
		// bounded number of concurrent callers (2 × its MAX_THREADS, 64 in
		// common builds), beyond which it aborts.
		b.threads = min(b.threads, maxBLASCallers)
		b.name = "cpu (" + b.blas.name + ")"
	} else {
		b.name = "cpu-go"
	}
	b.pool = newPool(b.threads - 1)
	limit := opts.PoolLimit
	if limit == 0 {
		limit = bufpool.DefaultLimit
	}
	b.mem = bufpool.New[[]float32](limit, nil)
	return b, nil
}

// Name returns "cpu (<blas>)", or "cpu-go" for the pure-Go GEMM.
func (b *Backend) Name() string { return b.name }

// Threads returns the number of goroutines an operation fans out to.
func (b *Backend) Threads() int { return b.threads }

// buf is the Tensor of this backend.
type buf struct{ d []float32 }

func (t *buf) Len() int { return len(t.d) }

// data returns the elements of a tensor of this backend.
func data(t tensor.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.(*buf).d
}

// Alloc returns a tensor of n float32 elements with unspecified contents
// (memory given back by Free is reused).
func (b *Backend) Alloc(n int) tensor.Tensor {
	if d, ok := b.mem.Get(4 * int64(n)); ok {
		return &buf{d: d[:n]}
	}
	return &buf{d: make([]float32, n)}
}

// Free gives the tensor's memory back for reuse; the tensor must not be used
// afterwards.
func (b *Backend) Free(t tensor.Tensor) {
	if t == nil {
		return
	}
	bt := t.(*buf)
	b.putMem(bt.d)
	bt.d = nil
}

// putMem keeps d's memory for reuse, filed under its capacity.
func (b *Backend) putMem(d []float32) {
	if cap(d) > 0 {
		b.mem.Put(4*int64(cap(d)), d[:cap(d)])
	}
}

// PoolStats returns the bytes of freed tensors and scratch buffers kept for
// reuse and their bound.
func (b *Backend) PoolStats() (held, limit int64) {
	st := b.mem.Stats()
	return st.Held, st.Limit
}

// SetPoolLimit bounds the memory kept for reuse (≤ 0: none), dropping the
// least recently used buffers beyond it now and whenever a freed one would
// pass it. The default is bufpool.DefaultLimit (1 GiB).
func (b *Backend) SetPoolLimit(bytes int64) { b.mem.SetLimit(bytes) }

var _ tensor.Pooler = (*Backend)(nil)

// Write copies src into t[off : off+len(src)].
func (b *Backend) Write(t tensor.Tensor, off int, src []float32) {
	copy(data(t)[off:off+len(src)], src)
}

// Read copies t[off : off+len(dst)] into dst. Operations are synchronous, so
// there is nothing to wait for.
func (b *Backend) Read(ctx context.Context, t tensor.Tensor, off int, dst []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	copy(dst, data(t)[off:off+len(dst)])
	return nil
}

// Sync returns at once: every operation has finished when it returns.
func (b *Backend) Sync(ctx context.Context) error { return ctx.Err() }

// Copy copies rows × cols elements between strided views of two tensors.
func (b *Backend) Copy(dst tensor.Tensor, dstOff, dstStride int, src tensor.Tensor, srcOff, srcStride, rows, cols int) {
	if rows <= 0 {
		return
	}
	copyRows(data(dst)[dstOff:], dstStride, data(src)[srcOff:], srcStride, rows, cols)
}

// parallel runs fn(i) for i in [0, n) on up to b.threads goroutines, handing
// out indices one at a time (so uneven tasks balance), and returns when all
// have finished. The calling goroutine and the backend's pool helpers do the
// work; when the pool is busy (an overlapping or nested call) the call starts
// goroutines of its own.
func (b *Backend) parallel(n int, fn func(i int)) {
	workers := min(b.threads, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	if b.pool.run(n, workers, fn) {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// parallelRange splits [0, n) into about b.threads contiguous ranges of at
// least grain elements and runs fn on each.
func (b *Backend) parallelRange(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(b.threads, max(1, n/max(grain, 1)))
	if parts <= 1 {
		fn(0, n)
		return
	}
	step := (n + parts - 1) / parts
	b.parallel(parts, func(p int) {
		lo := p * step
		hi := min(n, lo+step)
		if lo < hi {
			fn(lo, hi)
		}
	})
}

// scratchBuf is a float32 scratch owned by one worker at a time, taken from
// the backend's pool.
type scratchBuf struct{ d []float32 }

// getScratch returns a scratch of n elements (with unspecified contents);
// give it back with putScratch. Its capacity is n rounded up to a size class
// (scratchClass), so that scratch of nearly the same size is reused.
func (b *Backend) getScratch(n int) scratchBuf {
	c := scratchClass(n)
	d, ok := b.mem.Get(4 * int64(c))
	if !ok {
		d = make([]float32, c)
	}
	return scratchBuf{d: d[:n]}
}

func (b *Backend) putScratch(s scratchBuf) { b.putMem(s.d) }

// scratchClass rounds n up to a scratch size class: a multiple of 256
// elements up to 4096, then of a quarter of n's largest power of two, so
// that a class wastes less than a quarter of what it holds.
func scratchClass(n int) int {
	if n <= 4096 {
		return max(256, (n+255)/256*256)
	}
	step := 1 << (bits.Len(uint(n)) - 3)
	return (n + step - 1) / step * step
}
