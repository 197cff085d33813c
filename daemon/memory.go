package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/sysmem"
)

// Footprint is what a model will hold once loaded, in bytes: what the fit
// check before a load holds against the machine's memory.
type Footprint struct {
	// Weights is the weights as they will be resident.
	Weights int64
	// Pass is the largest forward pass at the limits, with the prefix state
	// it runs after.
	Pass int64
	// Cache is the prefix cache's limit.
	Cache int64
	// Scratch is the limit of the backend's pool of freed buffers.
	Scratch int64
}

// Total returns the footprint in all.
func (f Footprint) Total() int64 { return f.Weights + f.Pass + f.Cache + f.Scratch }

// String spells the footprint out for people.
func (f Footprint) String() string {
	return fmt.Sprintf("%s: weights %s, largest pass %s, prefix cache %s, scratch %s",
		formatGB(f.Total()), formatGB(f.Weights), formatGB(f.Pass), formatGB(f.Cache), formatGB(f.Scratch))
}

// Estimator tells what loading the checkpoint in dir ("" for the embedded
// demo), with int8 projections when useInt8 is set, will hold, without loading it; [DecideEstimator] is the one of
// [DecideLoader]'s models.
type Estimator func(ctx context.Context, dir string, useInt8 bool) (Footprint, error)

// Memory is what the machine has for the daemon.
type Memory struct {
	// Known is false when the machine's memory could not be read; then
	// nothing is checked.
	Known bool
	// Total is the machine's memory (or its cgroup's limit).
	Total int64
	// Available is the memory the daemon could take now without pushing
	// other processes' memory out (sysmem.Available).
	Available int64
	// GPUWorkingSet is the Metal device's recommendedMaxWorkingSetSize (0:
	// no GPU bound): what the device keeps resident at most without
	// degrading, which a model on Metal is held to as well.
	GPUWorkingSet int64
}

// SystemMemory reads the machine's memory through package sysmem (no GPU
// bound: the command adds Metal's).
func SystemMemory() Memory {
	total, ok1 := sysmem.Total()
	avail, ok2 := sysmem.Available()
	return Memory{Known: ok1 && ok2, Total: total, Available: avail}
}

// Fit is what a load of a model would need against what the machine has
// now: the fit check a load makes, told before anyone asks for the load
// (startlux pull says it of the model it pulled).
type Fit struct {
	// Needs is the model's footprint.
	Needs Footprint
	// Memory is the machine's memory when it was told.
	Memory Memory
}

// EstimateFit estimates what loading the checkpoint in dir ("" for the
// embedded demo) needs at lo's limits, with float projections, against
// mem.
func EstimateFit(ctx context.Context, dir string, lo LoaderOptions, mem Memory) (Fit, error) {
	fp, err := DecideEstimator(lo)(ctx, dir, false)
	if err != nil {
		return Fit{}, err
	}
	return Fit{Needs: fp, Memory: mem}, nil
}

// Refused reports whether a load now would be refused for want of memory,
// unless it replaced a model in service that frees enough: the footprint
// is more than the memory available. Unknown memory refuses nothing.
func (f Fit) Refused() bool {
	return f.Memory.Known && f.Needs.Total() > f.Memory.Available
}

// EngineMemory is what a loaded engine holds now, in bytes.
type EngineMemory struct {
	// Weights is its resident weights.
	Weights int64
	// Cache and CacheLimit are the prefix cache's kept states and bound.
	Cache, CacheLimit int64
	// Scratch and ScratchLimit are the backend pool's kept buffers and
	// bound.
	Scratch, ScratchLimit int64
}

// held returns what the engine would give back if it were closed.
func (m EngineMemory) held() int64 { return m.Weights + m.Cache + m.Scratch }

// memoryReporter is implemented by engines that say what they hold (those
// of [DecideLoader]).
type memoryReporter interface {
	Memory() EngineMemory
}

// engineMemory returns what eng holds, zero when it does not say.
func engineMemory(eng Engine) EngineMemory {
	if r, ok := eng.(memoryReporter); ok {
		return r.Memory()
	}
	var m EngineMemory
	m.Cache, m.CacheLimit = eng.CacheStats()
	return m
}

// fitMargin is the memory a load should leave free, below which status
// warns: a tenth of the machine's memory, at least 512 MiB.
func fitMargin(total int64) int64 { return max(total/10, 512<<20) }

// fitPlan is what the fit check decided for a load.
type fitPlan struct {
	// needs is the model's footprint in all (0: not checked).
	needs int64
	// warning is status's memory warning for the model, if any.
	warning string
	// release says to release the model in service before loading: both
	// would not fit together, the new one alone does.
	release bool
	// why is status's note while the previous model is released.
	why string
}

// fitCheck estimates what loading dir will hold and holds it against the
// machine's memory (and Metal's working set), counting what the model in
// service would give back: the load goes ahead beside it, after releasing
// it, or is refused with both numbers. An estimate that fails does not
// refuse the load (the loader reports what is wrong with the checkpoint);
// it is said in the warning.
func (d *Daemon) fitCheck(dir string, useInt8 bool) (fitPlan, error) {
	if d.opts.Estimate == nil {
		return fitPlan{}, nil
	}
	fp, err := d.opts.Estimate(d.ctx, dir, useInt8)
	if err != nil {
		return fitPlan{warning: fmt.Sprintf("the memory the model needs could not be told, so it was not checked: %v", err)}, nil
	}
	mem := d.machine()
	plan := fitPlan{needs: fp.Total()}
	if !mem.Known {
		plan.warning = "the machine's free memory could not be read, so the fit was not checked"
		return plan, nil
	}
	var held int64
	d.mu.Lock()
	if d.cur != nil {
		held = engineMemory(d.cur.eng).held()
	}
	d.mu.Unlock()
	need, avail, ws := plan.needs, mem.Available, mem.GPUWorkingSet
	beside := need <= avail && (ws == 0 || need <= ws-held)
	alone := need <= avail+held && (ws == 0 || need <= ws)
	switch {
	case beside:
		if left := avail - need; left < fitMargin(mem.Total) {
			plan.warning = fmt.Sprintf("low memory: the model needs %s, which leaves %s of the machine's %s free", formatGB(need), formatGB(left), formatGB(mem.Total))
		}
	case alone && held > 0:
		plan.release = true
		plan.why = fmt.Sprintf("released the previous model first: both would not fit (the new one needs %s, %s available beside the previous one); decisions wait until the new one is ready", formatGB(need), formatGB(avail))
		if left := avail + held - need; left < fitMargin(mem.Total) {
			plan.warning = fmt.Sprintf("low memory: the model needs %s, which leaves %s of the machine's %s free", formatGB(need), formatGB(left), formatGB(mem.Total))
		}
	case need > avail+held:
		return plan, api.Errorf(api.CodeModelLoadFailed, "not enough memory: the model needs %s, %s available (%s)", formatGB(need), formatGB(avail+held), fp)
	default:
		return plan, api.Errorf(api.CodeModelLoadFailed, "not enough GPU memory: the model needs %s, the GPU's recommended working set is %s (%s)", formatGB(need), formatGB(ws), fp)
	}
	return plan, nil
}

// machine returns what the machine has: the Memory option's, or
// SystemMemory.
func (d *Daemon) machine() Memory {
	if d.opts.Memory != nil {
		return d.opts.Memory()
	}
	return SystemMemory()
}

// releaseForLoad takes the model in service out of service so that the
// model about to be loaded fits: decisions wait meanwhile (state loading,
// with why in status's memory note). It returns once the model is closed
// (the batches running on it finished) and its memory handed back, or when
// ctx ends.
func (d *Daemon) releaseForLoad(ctx context.Context, why string) (prev *loaded, err error) {
	d.mu.Lock()
	old := d.cur
	if old == nil {
		d.mu.Unlock()
		return nil, errors.New("no model to release")
	}
	d.cur = nil
	d.state, d.memNote = api.StateLoading, why
	d.changedLocked()
	d.mu.Unlock()
	d.retire(old)
	select {
	case <-old.closed:
	case <-ctx.Done():
		return old, ctx.Err()
	}
	debug.FreeOSMemory()
	return old, nil
}

// memoryStatus fills status's memory fields from the model in service
// (held by the caller under d.mu, nil when none) and the machine.
func (d *Daemon) memoryStatus(m *loaded) api.MemoryStatus {
	var st api.MemoryStatus
	if m != nil {
		em := engineMemory(m.eng)
		st.Weights, st.Cache, st.CacheLimit = em.Weights, em.Cache, em.CacheLimit
		st.Scratch, st.ScratchLimit = em.Scratch, em.ScratchLimit
		st.Needs, st.Warning = m.needs, m.warning
	}
	st.Note = d.memNote
	return st
}

// formatGB writes a byte count as people read memory sizes: "9.1 GB",
// "412 MB".
func formatGB(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}
