// Package doctor examines the machine StartLux runs on and says what it
// finds, check by check: what `startlux doctor` prints for a bug report.
// Every check ends ok or failed with a reason; a failed check never stops
// the others.
package doctor

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/startlux/startlux/tensor"
)

// Status is a check's outcome.
type Status string

// The outcomes of a check. Skipped is only for parts of a check left out
// on purpose (the reason says why); a check as a whole is ok or failed.
const (
	OK      Status = "ok"
	Failed  Status = "failed"
	Skipped Status = "skipped"
)

// Check is the outcome of one check: ok, or failed with the reason.
type Check struct {
	Status Status `json:"status"`
	// Reason says why the check failed ("" when it passed).
	Reason string `json:"reason,omitempty"`
}

func ok() Check              { return Check{Status: OK} }
func failed(err error) Check { return Check{Status: Failed, Reason: err.Error()} }
func failedf(f string, a ...any) Check {
	return Check{Status: Failed, Reason: fmt.Sprintf(f, a...)}
}

// Report is everything doctor found, one field per check.
type Report struct {
	System    System    `json:"system"`
	Backend   Backend   `json:"backend"`
	Metal     Metal     `json:"metal"`
	BLAS      BLAS      `json:"blas"`
	Int8      Int8      `json:"int8"`
	SelfCheck SelfCheck `json:"self_check"`
	Socket    Socket    `json:"socket"`
	Daemon    Daemon    `json:"daemon"`
	LoginItem LoginItem `json:"login_item"`
	Models    Models    `json:"models"`
}

// Options tune Run.
type Options struct {
	// Socket is the daemon's socket ("": the default path).
	Socket string
	// ModelsDir is the models folder ("": the default).
	ModelsDir string
	// NoEmulator skips building the Metal kernel emulator (and so, off a
	// Mac, the self-check, which runs under it there).
	NoEmulator bool
	// SgemmTime is how long the sgemm rate is measured (200 ms when zero).
	SgemmTime time.Duration
	// CallTimeout bounds the daemon's answer (2 s when zero).
	CallTimeout time.Duration
	// LoginItems, when set, replaces the system's report of its login
	// items (tests).
	LoginItems func(ctx context.Context) (LoginItem, error)
}

// Run runs every check and returns the report; ctx bounds the whole run.
func Run(ctx context.Context, opts Options) Report {
	if opts.SgemmTime <= 0 {
		opts.SgemmTime = 200 * time.Millisecond
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Second
	}
	var r Report
	var auto tensor.Backend
	guard(&r.System.Check, func() { r.System = checkSystem() })
	guard(&r.Backend.Check, func() { r.Backend, auto = checkBackend() })
	defer closeBackend(auto)
	guard(&r.Metal.Check, func() { r.Metal = checkMetal(ctx, opts) })
	guard(&r.BLAS.Check, func() { r.BLAS = checkBLAS(ctx, opts) })
	guard(&r.Int8.Check, func() { r.Int8 = checkInt8(auto) })
	r.SelfCheck.Families = []Family{}
	guard(&r.SelfCheck.Check, func() { r.SelfCheck = checkSelf(ctx, opts, auto) })
	guard(&r.Socket.Check, func() { r.Socket = checkSocket(opts.Socket) })
	guard(&r.Daemon.Check, func() { r.Daemon = checkDaemon(ctx, r.Socket.Path, opts.CallTimeout) })
	guard(&r.LoginItem.Check, func() { r.LoginItem = checkLoginItem(ctx, opts) })
	guard(&r.Models.Check, func() { r.Models = checkModels(opts.ModelsDir) })
	return r
}

// guard runs a check; a panic inside it becomes the check's failure
// instead of ending the report.
func guard(c *Check, f func()) {
	defer func() {
		if p := recover(); p != nil {
			*c = failedf("the check panicked: %v", p)
		}
	}()
	f()
}

// System is the machine and the build.
type System struct {
	Check
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	OSVersion string `json:"os_version,omitempty"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	// Revision is the VCS revision the binary was built from, when known.
	Revision string `json:"revision,omitempty"`
}

func checkSystem() System {
	s := System{Check: ok(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OSVersion: osVersion()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				s.Revision = kv.Value
			}
		}
	}
	return s
}
