// Package gpucheck decides whether a GPU backend may serve decisions on
// this machine. Nothing of the Metal path has been proven on a given Mac
// until it runs there, so before a daemon serves on it, it runs a fixed
// probe through the GPU backend and through the CPU backend and compares
// them: every kernel family on small shapes with tails (metal.SelfCheck, in
// the weight forms of the checkpoint being served), then one whole forward
// pass of the embedded demo model on a few rows (their letter logits). A
// kernel that does not compile or dispatch, a command buffer that fails or
// does not finish, or an answer that differs from the CPU's makes the
// backend unfit, with a reason a user can read and paste into a bug report.
package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// DefaultTimeout bounds a whole check when Options.Timeout is zero. On a
// GPU the check takes well under a second; under the kernel emulator a few
// seconds (docs/metal.md).
const DefaultTimeout = 2 * time.Minute

// Options tune Run.
type Options struct {
	// Forms are the weight forms whose MatMul and Embed kernels are
	// checked (nil: metal.AllWeightForms()); a daemon passes those of its
	// checkpoint (metal.FormsOf).
	Forms []metal.WeightForm
	// Timeout bounds the check (0: DefaultTimeout); a check that runs past
	// it fails, naming where it stopped.
	Timeout time.Duration
	// NoModel leaves out the demo model's forward pass (the kernel
	// families only).
	NoModel bool
}

// Applies reports whether be is a backend the check is for: the Metal
// backend, on the GPU or under the emulator. The CPU backend is the
// reference and needs none.
func Applies(be tensor.Backend) bool {
	_, ok := be.(*metal.Backend)
	return ok
}

// Result is what a check found.
type Result struct {
	// Backend names the backend checked ("metal", "metal-emu").
	Backend string
	// Families holds one result per kernel family (metal.SelfCheck).
	Families []metal.FamilyResult
	// Model is the demo model's forward pass.
	Model ModelResult
	// Elapsed is how long the check took.
	Elapsed time.Duration
	// Timeout is the bound it ran under, and TimedOut whether it ran past
	// it.
	Timeout  time.Duration
	TimedOut bool
}

// ModelResult is the outcome of the demo model's forward pass on both
// backends.
type ModelResult struct {
	// Ran is false when the pass was left out (Options.NoModel) or not
	// reached (a kernel family had failed already, or the check ran out of
	// time).
	Ran bool
	// Rows is how many rows were compared.
	Rows int
	// MaxRel is the largest relative error of one row's letter logits
	// against the CPU's (‖a−b‖/‖b‖), Tol its bound, Where the row.
	MaxRel, Tol float64
	Where       string
	// Err is why the pass could not be compared: a failure to load or run
	// on either backend, or logits that are not finite.
	Err error
}

// OK reports whether the pass ran and agreed within its tolerance.
func (m ModelResult) OK() bool { return m.Ran && m.Err == nil && m.MaxRel <= m.Tol }

// OK reports whether the backend may serve: every family and the model
// pass (when it was asked for) agreed with the CPU in time.
func (r Result) OK() bool { return r.Reason() == "" }

// Reason says why the backend may not serve ("" when it may): the first
// family that failed, else the model pass, such as "attention kernel
// differs from the CPU by 3.1e-02 at head 2 of token 5" or "the self-check
// did not finish within 2m0s (stopped at: conv kernel failed: metal:
// context deadline exceeded)".
func (r Result) Reason() string {
	for _, f := range r.Families {
		if f.OK() {
			continue
		}
		reason := familyReason(f)
		if r.TimedOut {
			return fmt.Sprintf("the self-check did not finish within %s (stopped at: %s)", r.Timeout, reason)
		}
		return reason
	}
	m := r.Model
	switch {
	case m.OK():
		return ""
	case r.TimedOut:
		return fmt.Sprintf("the self-check did not finish within %s (it stopped in the demo model's forward pass)", r.Timeout)
	case !m.Ran:
		return ""
	case m.Err != nil:
		return fmt.Sprintf("the demo model's forward pass failed: %v", m.Err)
	case m.MaxRel > m.Tol:
		return fmt.Sprintf("the demo model's letter logits differ from the CPU's by %.1e at %s (tolerance %.0e)", m.MaxRel, m.Where, m.Tol)
	}
	return ""
}

// Note is the line a daemon shows when it does not serve on the backend
// ("Metal disabled: <reason>"), "" when the check passed.
func (r Result) Note() string {
	if reason := r.Reason(); reason != "" {
		return NotePrefix + reason
	}
	return ""
}

// NotePrefix starts every note of a GPU backend turned off.
const NotePrefix = "Metal disabled: "

// Err returns nil when the check passed, else an *Error with its reason.
func (r Result) Err() error {
	if reason := r.Reason(); reason != "" {
		return &Error{Backend: r.Backend, Reason: reason}
	}
	return nil
}

// Error is a failed check.
type Error struct {
	Backend string
	Reason  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s self-check failed: %s", e.Backend, e.Reason) }

// familyReason is a failed family's finding without metal's "... disabled: "
// lead: here any family failing turns the whole backend off.
func familyReason(f metal.FamilyResult) string {
	n := f.Note()
	if _, rest, ok := strings.Cut(n, " disabled: "); ok {
		return rest
	}
	return n
}

// Run checks be against ref (the CPU backend) and returns what it found.
// The kernel families run first; the demo model's pass runs only when they
// all passed. ctx ending stops the check early; its families then carry
// ctx's error, and the caller, which knows that ctx ended, should not read
// the result as a verdict on the GPU. A check running past its timeout is
// such a verdict: a GPU that does not finish its work is unfit.
func Run(ctx context.Context, be, ref tensor.Backend, opts Options) Result {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r := Result{Backend: be.Name(), Timeout: opts.Timeout}
	r.Families = metal.SelfCheck(cctx, be, ref, opts.Forms)
	passed := true
	for _, f := range r.Families {
		passed = passed && f.OK()
	}
	if passed && !opts.NoModel && cctx.Err() == nil {
		r.Model = checkModel(cctx, be, ref)
	}
	r.TimedOut = ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	r.Elapsed = time.Since(start)
	return r
}
