package metal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// This file holds how device failures reach callers (tensor.ErrDeviceFault,
// the bound on a wait) and the faults a test can inject into the emulator.

// DefaultCommandTimeout bounds a wait for the GPU (Read, Sync) when
// Options.CommandTimeout is zero on the GPU. A whole forward pass is one
// wait; the longest the daemon issues (16384 tokens) takes seconds on
// Apple Silicon, so a wait this long means the GPU is stuck.
const DefaultCommandTimeout = time.Minute

// commandTimeout returns the bound of a wait: opts' own, the default on
// the GPU, none under the emulator (whose kernels run on the CPU, slowly);
// 0 means none.
func commandTimeout(opts Options, gpu bool) time.Duration {
	switch {
	case opts.CommandTimeout < 0:
		return 0
	case opts.CommandTimeout > 0:
		return opts.CommandTimeout
	case gpu:
		return DefaultCommandTimeout
	}
	return 0
}

// deviceFault marks an error of the device as tensor.ErrDeviceFault without
// changing its text.
type deviceFault struct{ err error }

func (e deviceFault) Error() string   { return e.err.Error() }
func (e deviceFault) Unwrap() []error { return []error{tensor.ErrDeviceFault, e.err} }

// syncErr returns what Sync reports for a wait's error werr under ctx (the
// caller's) and wctx (ctx with the backend's bound) and the error recorded
// while queueing: ctx's end as it is, anything else as a device fault.
func (b *Backend) syncErr(ctx, wctx context.Context, werr error) error {
	err := werr
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = fmt.Errorf("the GPU has not finished its work within %s", b.timeout)
	}
	if b.err != nil {
		err = b.err
		b.err = nil
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return fmt.Errorf("metal: %w", err)
	}
	return fmt.Errorf("metal: %w", deviceFault{err})
}

// Faults makes the kernel emulator fail as a broken GPU might, so that what
// is built on the backend (the self-check, a daemon's fallback to the CPU
// backend) can be tested off a Mac. It is a test option: it is reached only
// through Options.Faults of NewEmulated (no flag or environment variable
// sets it), and New refuses it. The zero value injects nothing. Its
// methods are safe for concurrent use, so a test may arm or clear faults
// while the backend serves.
type Faults struct {
	mu   sync.Mutex // guards list and hits
	list []Fault
	hits int
}

// Fault is one way kernels go wrong.
type Fault struct {
	// Kernel selects the dispatches hit: those of the kernels whose host
	// names start with it ("attention", "rmsnorm", "mm" for the tiled
	// matmuls, "" for every kernel).
	Kernel string
	// Scale, when not zero, multiplies what the kernel wrote into the
	// buffer bound at index 0 (every kernel's output): a kernel that
	// computes wrong values.
	Scale float32
	// Fail makes the command buffer of the dispatch complete with an
	// error: the dispatch and the work queued after it do not run, and the
	// wait reports "command buffer failed: …".
	Fail bool
	// Delay holds the dispatch this long before it runs, or until the
	// wait's context ends (the dispatch then stays queued): a command
	// buffer that does not finish.
	Delay time.Duration
}

// Set replaces the faults injected from now on (none: clear them).
func (f *Faults) Set(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = append([]Fault(nil), faults...)
}

// Hits returns how many dispatches a fault has hit so far.
func (f *Faults) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// match returns the first fault that hits kernel, counting the hit.
func (f *Faults) match(kernel string) (Fault, bool) {
	if f == nil {
		return Fault{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.list {
		if strings.HasPrefix(kernel, ft.Kernel) {
			f.hits++
			return ft, true
		}
	}
	return Fault{}, false
}

// runFaulty runs the dispatch c as the faults say; false when ctx ended
// during a delay, leaving c to run later.
func (d *emuDriver) runFaulty(ctx context.Context, c emuCall) bool {
	ft, hit := d.faults.match(c.kernel)
	if !hit {
		d.run(c.kernel, c.groups, c.threads, c.binds)
		return true
	}
	if ft.Delay > 0 {
		t := time.NewTimer(ft.Delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	if ft.Fail {
		if d.err == nil {
			d.err = fmt.Errorf("command buffer failed: Internal Error (0000000e:Internal Error), injected by a test into kernel %s", c.kernel)
		}
		return true
	}
	var out, before []byte
	if ft.Scale != 0 {
		for _, b := range c.binds {
			if e, ok := b.buf.(*emuBuf); ok && b.index == 0 {
				out = e.data[b.off:]
				before = append([]byte(nil), out...)
			}
		}
	}
	d.run(c.kernel, c.groups, c.threads, c.binds)
	if out != nil && d.err == nil {
		scaleWritten(out, before, ft.Scale)
	}
	return true
}

// scaleWritten multiplies by s the float32s of p that differ from before
// (what a dispatch wrote; kernels dispatched once per row write only their
// row of a buffer bound whole).
func scaleWritten(p, before []byte, s float32) {
	if len(p) < 4 {
		return
	}
	v := unsafe.Slice((*float32)(unsafe.Pointer(&p[0])), len(p)/4)
	w := unsafe.Slice((*float32)(unsafe.Pointer(&before[0])), len(p)/4)
	for i, x := range v {
		if math.Float32bits(x) != math.Float32bits(w[i]) {
			v[i] = x * s
		}
	}
}
