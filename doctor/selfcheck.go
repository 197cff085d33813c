package doctor

import (
	"context"
	"fmt"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/gpucheck"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// SelfCheck is the check a daemon runs on the GPU before it serves there
// (package gpucheck: every kernel family against the CPU backend, then the
// demo model's letter logits), run here once.
type SelfCheck struct {
	Check
	// On is what it ran on: "metal" (the GPU), "metal-emu" (no GPU here:
	// the kernels ran on the CPU under the emulator, compiled by clang-19
	// from the same sources), or "" when it could run on neither.
	On string `json:"on"`
	// Families holds one result per kernel family, in every weight form
	// the kernels are built for (and int8 where the backend runs it).
	Families []Family `json:"families"`
	// Model is the demo model's pass.
	Model ModelPass `json:"model"`
	// ElapsedMS is how long the check took.
	ElapsedMS float64 `json:"elapsed_ms"`
}

// Family is one kernel family's result: the largest relative error of an
// output vector against the CPU backend, its bound, and where it was.
type Family struct {
	Check
	Name   string  `json:"name"`
	MaxRel float64 `json:"max_rel"`
	Tol    float64 `json:"tol"`
	Where  string  `json:"where"`
}

// ModelPass is the demo model's forward pass on both backends: the
// largest relative error of one row's letter logits.
type ModelPass struct {
	Check
	Rows   int     `json:"rows"`
	MaxRel float64 `json:"max_rel"`
	Tol    float64 `json:"tol"`
	Where  string  `json:"where"`
}

// emuModelSkip is why the demo model's pass is left out under the
// emulator.
const emuModelSkip = "left out under the emulator, where its two passes take half a minute or more; it runs on a Mac's GPU"

// checkSelf runs the check on auto when that is the GPU, else under the
// emulator (unless opts.NoEmulator).
func checkSelf(ctx context.Context, opts Options, auto tensor.Backend) SelfCheck {
	if auto != nil && gpucheck.Applies(auto) {
		return runSelfCheck(ctx, auto, "metal", false)
	}
	if opts.NoEmulator {
		return SelfCheck{Check: failedf("not run: no GPU here, and the emulator is not checked (--no-emulator)"), Families: []Family{}}
	}
	be, err := metal.NewEmulatedContext(ctx, metal.Options{})
	if err != nil {
		return SelfCheck{Check: failedf("not run: no GPU here, and the emulator does not build: %v", err), Families: []Family{}}
	}
	defer closeBackend(be)
	return runSelfCheck(ctx, be, "metal-emu", true)
}

// runSelfCheck checks be (called on) against the CPU backend.
func runSelfCheck(ctx context.Context, be tensor.Backend, on string, emulated bool) SelfCheck {
	s := SelfCheck{On: on, Families: []Family{}}
	ref, err := cpu.New(cpu.Options{})
	if err != nil {
		s.Check = failedf("the reference backend: %v", err)
		return s
	}
	forms := metal.AllWeightForms()
	if ib, ok := be.(tensor.Int8Backend); ok {
		if _, err := ib.Int8Kernel(); err == nil {
			forms = append(forms, metal.WeightForm{DType: tensor.I8})
		}
	}
	res := gpucheck.Run(ctx, be, ref, gpucheck.Options{Forms: forms, NoModel: emulated})
	s.ElapsedMS = float64(res.Elapsed.Microseconds()) / 1000
	for _, f := range res.Families {
		fam := Family{Check: ok(), Name: f.Family, MaxRel: f.MaxRel, Tol: f.Tol, Where: f.Where}
		if !f.OK() {
			fam.Check = failedf("%s", f.Note())
		}
		s.Families = append(s.Families, fam)
	}
	m := res.Model
	s.Model = ModelPass{Rows: m.Rows, MaxRel: m.MaxRel, Tol: m.Tol, Where: m.Where}
	switch {
	case emulated:
		s.Model.Check = Check{Status: Skipped, Reason: emuModelSkip}
	case m.OK():
		s.Model.Check = ok()
	case !m.Ran:
		s.Model.Check = failedf("not run: a kernel family failed first")
	default:
		s.Model.Check = failedf("%s", res.Reason())
	}
	s.Check = ok()
	if reason := res.Reason(); reason != "" {
		s.Check = failedf("%s", reason)
	}
	return s
}

// summary is the self-check's line in the text report.
func (s SelfCheck) summary() string {
	bad := 0
	for _, f := range s.Families {
		if f.Status != OK {
			bad++
		}
	}
	where := s.On
	if s.On == "metal-emu" {
		where = "metal-emu (no GPU here: the kernel emulator)"
	}
	if where == "" {
		return ""
	}
	return fmt.Sprintf("on %s: %d of %d kernel families agree with the CPU, in %.0f ms", where, len(s.Families)-bad, len(s.Families), s.ElapsedMS)
}
