//go:build darwin && arm64

package metal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/startlux/startlux/internal/objcrt"
	"github.com/startlux/startlux/tensor"
)

// This file is the Metal device binding. It is compiled for darwin/arm64
// only and has never run in this project's CI (which has no Mac); see
// docs/metal.md. Every selector, argument and return type below was checked
// against the macOS SDK headers (MTLDevice.h, MTLCommandBuffer.h,
// MTLComputeCommandEncoder.h, MTLLibrary.h); the header each comes from is
// named where it is used. It stays one file, over 600 lines, because it
// is one binding read against those headers: the device, queue, buffers,
// pipelines and command buffers it wraps call each other's selectors, and a
// reviewer checks them side by side with the SDK.

// Supported reports whether this build has the GPU backend: it does
// (darwin/arm64); whether a device opens is New's to say.
func Supported() error { return nil }

// New returns the Metal backend on the GPU picked by opts.Device among
// MTLCopyAllDevices (MTLCreateSystemDefaultDevice returns nil in a daemon).
func New(opts Options) (tensor.Backend, error) {
	if opts.Faults != nil {
		return nil, errors.New("metal: Options.Faults injects faults into the emulator only")
	}
	d, err := newMTLDriver(opts)
	if err != nil {
		return nil, err
	}
	return newBackend(d, opts, true), nil
}

// mtlSize is MTLSize: three NSUIntegers.
type mtlSize struct{ W, H, D uint }

// MTLResourceStorageModeShared | MTLResourceHazardTrackingModeDefault.
const mtlStorageShared = 0

// Command buffer status values (MTLCommandBufferStatus, NSUInteger).
const (
	mtlStatusCompleted = 4
	mtlStatusError     = 5
)

// dispatchesPerCommit is how many dispatches a command buffer collects
// before it is committed, so the GPU starts while recording goes on.
const dispatchesPerCommit = 256

type mtlBuf struct {
	id   objc.ID
	ptr  unsafe.Pointer
	size int
}

type pipeline struct {
	state      objc.ID
	maxThreads int
}

// sels are the selectors the driver sends, resolved once.
type sels struct {
	count, objectAtIndex, retain, release, alloc, init, name,
	newCommandQueue, newLibraryWithSource, setFastMathEnabled,
	newFunctionWithName, newComputePipelineState, maxTotalThreads, newBufferWithLength,
	newBufferNoCopy, newBufferWithBytes, contents, commandBuffer, computeCommandEncoder,
	setComputePipelineState, setBuffer, setBytes, dispatchThreadgroups, endEncoding, commit,
	waitUntilCompleted, status, errorSel, localizedDescription, maxBufferLength,
	recommendedMaxWorkingSetSize, hasUnifiedMemory, supportsFamily objc.SEL
}

func newSels() sels {
	r := objc.RegisterName
	return sels{
		count: r("count"), objectAtIndex: r("objectAtIndex:"), retain: r("retain"), release: r("release"),
		alloc: r("alloc"), init: r("init"), name: r("name"),
		newCommandQueue:         r("newCommandQueue"),
		newLibraryWithSource:    r("newLibraryWithSource:options:error:"),
		setFastMathEnabled:      r("setFastMathEnabled:"),
		newFunctionWithName:     r("newFunctionWithName:"),
		newComputePipelineState: r("newComputePipelineStateWithFunction:error:"),
		maxTotalThreads:         r("maxTotalThreadsPerThreadgroup"),
		newBufferWithLength:     r("newBufferWithLength:options:"),
		newBufferNoCopy:         r("newBufferWithBytesNoCopy:length:options:deallocator:"),
		newBufferWithBytes:      r("newBufferWithBytes:length:options:"),
		contents:                r("contents"),
		commandBuffer:           r("commandBuffer"),
		computeCommandEncoder:   r("computeCommandEncoder"),
		setComputePipelineState: r("setComputePipelineState:"),
		setBuffer:               r("setBuffer:offset:atIndex:"),
		setBytes:                r("setBytes:length:atIndex:"),
		dispatchThreadgroups:    r("dispatchThreadgroups:threadsPerThreadgroup:"),
		endEncoding:             r("endEncoding"), commit: r("commit"),
		waitUntilCompleted:   r("waitUntilCompleted"),
		status:               r("status"),
		errorSel:             r("error"),
		localizedDescription: r("localizedDescription"),
		maxBufferLength:      r("maxBufferLength"),
		// MTLDevice.h: uint64_t recommendedMaxWorkingSetSize; BOOL
		// hasUnifiedMemory; - (BOOL)supportsFamily:(MTLGPUFamily).
		recommendedMaxWorkingSetSize: r("recommendedMaxWorkingSetSize"),
		hasUnifiedMemory:             r("hasUnifiedMemory"),
		supportsFamily:               r("supportsFamily:"),
	}
}

// msgs are objc_msgSend typed for each shape of message the driver sends,
// registered once when the driver is made (purego's generic objc.Send
// registers a function through reflection on every call).
type msgs struct {
	id     func(objc.ID, objc.SEL) objc.ID
	void   func(objc.ID, objc.SEL)
	idUint func(objc.ID, objc.SEL, uint) objc.ID
	idID   func(objc.ID, objc.SEL, objc.ID) objc.ID
	// newLibraryWithSource:options:error:
	library func(objc.ID, objc.SEL, objc.ID, objc.ID, *objc.ID) objc.ID
	// newComputePipelineStateWithFunction:error:
	pipelineState func(objc.ID, objc.SEL, objc.ID, *objc.ID) objc.ID
	// newBufferWithLength:options:
	bufLen func(objc.ID, objc.SEL, uint, uint) objc.ID
	// newBufferWithBytes:length:options:
	bufBytes func(objc.ID, objc.SEL, unsafe.Pointer, uint, uint) objc.ID
	// newBufferWithBytesNoCopy:length:options:deallocator: (a nil block)
	bufNoCopy func(objc.ID, objc.SEL, unsafe.Pointer, uint, uint, uintptr) objc.ID
	voidBool  func(objc.ID, objc.SEL, bool)
	voidID    func(objc.ID, objc.SEL, objc.ID)
	// setBuffer:offset:atIndex:
	setBuffer func(objc.ID, objc.SEL, objc.ID, uint, uint)
	// setBytes:length:atIndex:
	setBytes func(objc.ID, objc.SEL, unsafe.Pointer, uint, uint)
	// dispatchThreadgroups:threadsPerThreadgroup:
	dispatch func(objc.ID, objc.SEL, mtlSize, mtlSize)
}

func newMsgs(rt *objcrt.Runtime) msgs {
	var m msgs
	objcrt.Register(rt, &m.id)
	objcrt.Register(rt, &m.void)
	objcrt.Register(rt, &m.idUint)
	objcrt.Register(rt, &m.idID)
	objcrt.Register(rt, &m.library)
	objcrt.Register(rt, &m.pipelineState)
	objcrt.Register(rt, &m.bufLen)
	objcrt.Register(rt, &m.bufBytes)
	objcrt.Register(rt, &m.bufNoCopy)
	objcrt.Register(rt, &m.voidBool)
	objcrt.Register(rt, &m.voidID)
	objcrt.Register(rt, &m.setBuffer)
	objcrt.Register(rt, &m.setBytes)
	objcrt.Register(rt, &m.dispatch)
	return m
}

var _ int8Driver = (*mtlDriver)(nil)

type mtlDriver struct {
	rt    *objcrt.Runtime
	s     sels
	m     msgs
	dev   objc.ID
	queue objc.ID
	lib   objc.ID
	// lib8 is the int8 library (0 until compileInt8), int8 the names of
	// its kernels.
	lib8      objc.ID
	int8      map[string]bool
	pipes     map[string]pipeline
	cmd, enc  objc.ID
	nDispatch int
	inflight  []objc.ID // committed command buffers, retained, oldest first
	// waitDone is closed when the waiter goroutine has seen the first
	// waitN command buffers of inflight complete (nil: no waiter runs).
	waitDone chan struct{}
	waitN    int
	pending  []*mtlBuf
	// place holds the device's limits, the regions wrapped without a copy
	// (mmap'd checkpoint files; weights inside them are served as
	// offsets) and where weights went.
	place placement
	err   error
}

// loadMetal loads Metal.framework and returns MTLCopyAllDevices.
func loadMetal() (func() objc.ID, error) {
	lib, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("metal: load Metal.framework: %w", err)
	}
	// NSArray<id<MTLDevice>> *MTLCopyAllDevices(void), returned retained.
	var copyAllDevices func() objc.ID
	purego.RegisterLibFunc(&copyAllDevices, lib, "MTLCopyAllDevices")
	return copyAllDevices, nil
}

func newMTLDriver(opts Options) (*mtlDriver, error) {
	d, err := openDevice(opts)
	if err != nil {
		return nil, err
	}
	if err := d.compile(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// Describe opens the GPU picked by opts.Device, reads what it reports and
// compiles the kernel library, reporting a compile error in LibraryErr.
func Describe(opts Options) (DeviceInfo, error) {
	d, err := openDevice(opts)
	if err != nil {
		return DeviceInfo{}, err
	}
	defer d.close()
	var info DeviceInfo
	d.rt.Pool(func() {
		info = DeviceInfo{
			Name:                         d.rt.GoString(d.m.id(d.dev, d.s.name)),
			Families:                     familyNames(func(v int) bool { return d.rt.SendBoolInt(d.dev, d.s.supportsFamily, v) }),
			RecommendedMaxWorkingSetSize: d.rt.SendUint64(d.dev, d.s.recommendedMaxWorkingSetSize),
			MaxBufferLength:              uint64(d.place.lim.maxBuffer),
			UnifiedMemory:                d.rt.SendBool(d.dev, d.s.hasUnifiedMemory),
		}
	})
	if err := d.compile(); err != nil {
		info.LibraryErr = err.Error()
	}
	return info, nil
}

// RecommendedWorkingSet opens the GPU picked by opts.Device and returns its
// recommendedMaxWorkingSetSize (the bytes it keeps resident without
// degrading), without compiling the kernel library.
func RecommendedWorkingSet(opts Options) (uint64, error) {
	d, err := openDevice(opts)
	if err != nil {
		return 0, err
	}
	defer d.close()
	var n uint64
	d.rt.Pool(func() { n = d.rt.SendUint64(d.dev, d.s.recommendedMaxWorkingSetSize) })
	return n, nil
}

// openDevice opens the device and its command queue.
func openDevice(opts Options) (*mtlDriver, error) {
	copyAllDevices, err := loadMetal()
	if err != nil {
		return nil, err
	}
	rt, err := objcrt.Load()
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	d := &mtlDriver{rt: rt, s: newSels(), m: newMsgs(rt), pipes: map[string]pipeline{}}
	var ferr error
	rt.Pool(func() {
		devs := copyAllDevices()
		if devs == 0 {
			ferr = errors.New("metal: MTLCopyAllDevices returned no devices")
			return
		}
		defer d.m.void(devs, d.s.release)
		n := rt.SendUint(devs, d.s.count)
		if opts.Device < 0 || uint(opts.Device) >= n {
			ferr = fmt.Errorf("metal: device %d requested, %d available", opts.Device, n)
			return
		}
		d.dev = d.m.idUint(devs, d.s.objectAtIndex, uint(opts.Device))
		d.m.id(d.dev, d.s.retain)
		// @property (readonly) NSUInteger maxBufferLength (MTLDevice.h).
		d.place.lim = deviceLimits{pageSize: os.Getpagesize(), maxBuffer: int(rt.SendUint(d.dev, d.s.maxBufferLength))}
		d.queue = d.m.id(d.dev, d.s.newCommandQueue)
		if d.queue == 0 {
			ferr = errors.New("metal: newCommandQueue failed")
		}
	})
	if ferr != nil {
		d.close()
		return nil, ferr
	}
	return d, nil
}

// compile compiles the kernel library from the embedded sources.
func (d *mtlDriver) compile() error {
	src, err := librarySource()
	if err != nil {
		return err
	}
	lib, msg := d.compileSource(src)
	if lib == 0 {
		return fmt.Errorf("metal: compile kernels: %s", msg)
	}
	d.lib = lib
	return nil
}

// compileSource compiles MSL source into a library (retained, for the
// caller to release), or returns 0 and the compiler's report.
func (d *mtlDriver) compileSource(src string) (lib objc.ID, report string) {
	d.rt.Pool(func() {
		copts := d.m.id(d.m.id(objc.ID(objc.GetClass("MTLCompileOptions")), d.s.alloc), d.s.init)
		defer d.m.void(copts, d.s.release)
		// Precise math: RoPE angles reach thousands of radians, and the
		// int8 quantiser's divisions must be correctly rounded.
		// (fastMathEnabled is deprecated from macOS 15 in favour of
		// mathMode, and still honoured.)
		d.m.voidBool(copts, d.s.setFastMathEnabled, false)
		var nserr objc.ID
		lib = d.m.library(d.dev, d.s.newLibraryWithSource, d.rt.NSString(src), copts, &nserr)
		if lib == 0 {
			report = d.describe(nserr)
		}
	})
	return lib, report
}

// mtlGPUFamilyApple10 is MTLGPUFamilyApple10 (MTLDevice.h), the family of
// the M5 generation, whose GPU cores carry the neural accelerators.
const mtlGPUFamilyApple10 = 1010

// neuralAccelerators reports whether the GPU is of MTLGPUFamilyApple10 or
// later.
func (d *mtlDriver) neuralAccelerators() (ok bool) {
	d.rt.Pool(func() { ok = d.rt.SendBoolInt(d.dev, d.s.supportsFamily, mtlGPUFamilyApple10) })
	return ok
}

// compileInt8Probe compiles the int8 probe and makes the pipeline of its
// kernel, then releases both; the error is the compiler's message.
func (d *mtlDriver) compileInt8Probe(ctx context.Context, src string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lib, report := d.compileSource(src)
	if lib == 0 {
		return errors.New(compilerMessage(report))
	}
	p, err := d.newPipeline(lib, int8ProbeKernel)
	d.rt.Pool(func() {
		if err == nil {
			d.m.void(p.state, d.s.release)
		}
		d.m.void(lib, d.s.release)
	})
	return err
}

// compileInt8 compiles the int8 library and makes the pipelines of its
// kernels, which pipeline then takes from it.
func (d *mtlDriver) compileInt8(ctx context.Context, src string, kernels []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lib, report := d.compileSource(src)
	if lib == 0 {
		return errors.New(compilerMessage(report))
	}
	d.lib8 = lib
	d.int8 = map[string]bool{}
	for _, k := range kernels {
		d.int8[k] = true
	}
	for _, k := range kernels {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := d.pipeline(k); err != nil {
			return err
		}
	}
	return nil
}

// describe returns an NSError's localized description; call inside the
// pool that received the error.
func (d *mtlDriver) describe(nserr objc.ID) string {
	if nserr == 0 {
		return "unknown error"
	}
	return d.rt.GoString(d.m.id(nserr, d.s.localizedDescription))
}

func (d *mtlDriver) name() string { return "metal" }

func (d *mtlDriver) wrap(id objc.ID, size int) (*mtlBuf, error) {
	if id == 0 {
		return nil, fmt.Errorf("metal: buffer of %d bytes not created", size)
	}
	return &mtlBuf{id: id, ptr: d.rt.SendPtr(id, d.s.contents), size: size}, nil
}

func (d *mtlDriver) alloc(size int) (b buffer, err error) {
	size = max(size, 16)
	if err := checkBuffer(size, d.place.lim); err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	d.rt.Pool(func() {
		b, err = d.wrap(d.m.bufLen(d.dev, d.s.newBufferWithLength, uint(size), uint(mtlStorageShared)), size)
	})
	return b, err
}

func (d *mtlDriver) host(b buffer) []byte {
	m := b.(*mtlBuf)
	return unsafe.Slice((*byte)(m.ptr), m.size)
}

func (d *mtlDriver) free(b buffer) {
	m := b.(*mtlBuf)
	if d.idle() {
		d.rt.Pool(func() { d.m.void(m.id, d.s.release) })
		return
	}
	d.pending = append(d.pending, m)
}

// mapRegion wraps a region of memory (a whole mmap'd checkpoint file)
// without a copy when the device can (planRegion: page-aligned, whole
// pages, within maxBufferLength, and newBufferWithBytesNoCopy agrees), so
// weights inside it become offsets into one buffer. A region it cannot wrap
// is declined, never an error: its weights are then copied.
func (d *mtlDriver) mapRegion(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	plan := planRegion(start, len(data), d.place.lim)
	if plan.reason != "" {
		d.place.decline(plan.reason)
		return nil
	}
	var b *mtlBuf
	d.rt.Pool(func() {
		// The mapping's last page is mapped whole, so the buffer may span
		// it; a nil deallocator leaves unmapping to the file's owner.
		id := d.m.bufNoCopy(d.dev, d.s.newBufferNoCopy, unsafe.Pointer(&data[0]), uint(plan.size), uint(mtlStorageShared), 0)
		b, _ = d.wrap(id, plan.size)
	})
	if b == nil {
		d.place.decline(fmt.Sprintf("newBufferWithBytesNoCopy returned nil for %d bytes at %#x", plan.size, start))
		return nil
	}
	d.place.addRegion(start, len(data), b)
	return nil
}

// weight serves weight bytes as an offset into a wrapped region when they
// lie inside one at an offset the kernels can read (planWeight), else as a
// copy in a buffer of their own.
func (d *mtlDriver) weight(data []byte, align int) (buf buffer, off int, err error) {
	n := len(data)
	if n == 0 {
		n = 16 // every buffer has an address
	}
	i, off := -1, 0
	if len(data) > 0 {
		if i, off, err = planWeight(uintptr(unsafe.Pointer(&data[0])), len(data), align, d.place.regions, d.place.lim); err != nil {
			return nil, 0, fmt.Errorf("metal: %w", err)
		}
	}
	if i >= 0 {
		d.place.inRegion++
		return d.place.bufs[i], off, nil
	}
	d.rt.Pool(func() {
		var id objc.ID
		if len(data) == 0 {
			id = d.m.bufLen(d.dev, d.s.newBufferWithLength, uint(n), uint(mtlStorageShared))
		} else {
			id = d.m.bufBytes(d.dev, d.s.newBufferWithBytes, unsafe.Pointer(&data[0]), uint(len(data)), uint(mtlStorageShared))
		}
		buf, err = d.wrap(id, n)
	})
	if err != nil {
		return nil, 0, err
	}
	d.place.copied++
	return buf, 0, nil
}

func (d *mtlDriver) idle() bool { return d.cmd == 0 && len(d.inflight) == 0 }

// pipeline returns the compute pipeline of a kernel, creating it once.
func (d *mtlDriver) pipeline(kernel string) (pipeline, error) {
	if p, ok := d.pipes[kernel]; ok {
		return p, nil
	}
	lib := d.lib
	if d.int8[kernel] {
		lib = d.lib8
	}
	p, err := d.newPipeline(lib, kernel)
	if err != nil {
		return p, err
	}
	d.pipes[kernel] = p
	return p, nil
}

// newPipeline makes the compute pipeline of kernel in lib (retained, for
// the caller to release).
func (d *mtlDriver) newPipeline(lib objc.ID, kernel string) (p pipeline, err error) {
	d.rt.Pool(func() {
		fn := d.m.idID(lib, d.s.newFunctionWithName, d.rt.NSString(kernel))
		if fn == 0 {
			err = fmt.Errorf("metal: no kernel %q in the library", kernel)
			return
		}
		defer d.m.void(fn, d.s.release)
		var nserr objc.ID
		p.state = d.m.pipelineState(d.dev, d.s.newComputePipelineState, fn, &nserr)
		if p.state == 0 {
			err = fmt.Errorf("metal: pipeline %s: %s", kernel, d.describe(nserr))
			return
		}
		p.maxThreads = int(d.rt.SendUint(p.state, d.s.maxTotalThreads))
	})
	return p, err
}

// warmUp creates the pipeline of every kernel in the library.
func (d *mtlDriver) warmUp(ctx context.Context) error {
	src, err := librarySource()
	if err != nil {
		return err
	}
	ks, err := parseKernels(src)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := d.pipeline(k.name); err != nil {
			return err
		}
	}
	return nil
}

func (d *mtlDriver) dispatch(kernel string, groups, threads [3]int, binds []binding) {
	if d.err != nil {
		return
	}
	p, err := d.pipeline(kernel)
	if err != nil {
		d.err = err
		return
	}
	if n := threads[0] * threads[1] * threads[2]; n > p.maxThreads {
		d.err = fmt.Errorf("kernel %s: %d threads per group, the pipeline allows %d", kernel, n, p.maxThreads)
		return
	}
	d.rt.Pool(func() { d.encode(p, groups, threads, binds) })
}

// encode records one dispatch, starting a command buffer and an encoder
// when there is none, and commits every dispatchesPerCommit dispatches.
func (d *mtlDriver) encode(p pipeline, groups, threads [3]int, binds []binding) {
	if d.cmd == 0 {
		d.cmd = d.m.id(d.queue, d.s.commandBuffer)
		d.m.id(d.cmd, d.s.retain)
	}
	if d.enc == 0 {
		d.enc = d.m.id(d.cmd, d.s.computeCommandEncoder)
		d.m.id(d.enc, d.s.retain)
	}
	d.m.voidID(d.enc, d.s.setComputePipelineState, p.state)
	for _, b := range binds {
		if b.bytes != nil {
			d.m.setBytes(d.enc, d.s.setBytes, unsafe.Pointer(&b.bytes[0]), uint(len(b.bytes)), uint(b.index))
			continue
		}
		d.m.setBuffer(d.enc, d.s.setBuffer, b.buf.(*mtlBuf).id, uint(b.off), uint(b.index))
	}
	d.m.dispatch(d.enc, d.s.dispatchThreadgroups,
		mtlSize{uint(groups[0]), uint(groups[1]), uint(groups[2])},
		mtlSize{uint(threads[0]), uint(threads[1]), uint(threads[2])})
	d.nDispatch++
	if d.nDispatch >= dispatchesPerCommit {
		d.commit()
	}
}

// commit ends the current encoder and commits its command buffer; call
// inside a pool.
func (d *mtlDriver) commit() {
	if d.enc != 0 {
		d.m.void(d.enc, d.s.endEncoding)
		d.m.void(d.enc, d.s.release)
		d.enc = 0
	}
	if d.cmd != 0 {
		d.m.void(d.cmd, d.s.commit)
		d.inflight = append(d.inflight, d.cmd)
		d.cmd = 0
	}
	d.nDispatch = 0
}

// wait commits what is recorded and waits for every committed command
// buffer. The waiting itself (waitUntilCompleted, which blocks its thread)
// happens on a goroutine of its own, so that ctx can end the wait; a later
// wait picks up the same waiter, and no command buffer is released while
// the waiter may still touch it.
func (d *mtlDriver) wait(ctx context.Context) error {
	d.rt.Pool(d.commit)
	for len(d.inflight) > 0 {
		if d.waitDone == nil {
			cbs := append([]objc.ID(nil), d.inflight...)
			done := make(chan struct{})
			d.waitDone, d.waitN = done, len(cbs)
			go func() {
				defer close(done)
				d.rt.Pool(func() {
					for _, cb := range cbs {
						d.m.void(cb, d.s.waitUntilCompleted)
					}
				})
			}()
		}
		select {
		case <-d.waitDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		done := d.inflight[:d.waitN]
		d.inflight = d.inflight[d.waitN:]
		d.waitDone, d.waitN = nil, 0
		d.rt.Pool(func() { d.finish(done) })
	}
	d.rt.Pool(func() {
		for _, b := range d.pending {
			d.m.void(b.id, d.s.release)
		}
	})
	d.pending = nil
	err := d.err
	d.err = nil
	return err
}

// finish reads the outcome of completed command buffers into d.err and
// releases them; call inside a pool.
func (d *mtlDriver) finish(done []objc.ID) {
	for _, cb := range done {
		switch st := d.rt.SendUint(cb, d.s.status); {
		case st == mtlStatusCompleted || d.err != nil:
		case st == mtlStatusError:
			d.err = fmt.Errorf("command buffer failed: %s", d.describe(d.m.id(cb, d.s.errorSel)))
		default:
			d.err = fmt.Errorf("command buffer has status %d after waitUntilCompleted", st)
		}
		d.m.void(cb, d.s.release)
	}
}

func (d *mtlDriver) close() {
	d.rt.Pool(d.release)
}

// closeTimeout bounds how long close waits for the GPU to finish.
const closeTimeout = 10 * time.Second

// release waits (at most closeTimeout) for queued work and releases every
// object the driver holds; call inside a pool. When the GPU does not
// finish, nothing is released: objects a running command buffer may still
// use are leaked rather than freed under it.
func (d *mtlDriver) release() {
	if d.cmd != 0 || len(d.inflight) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		_ = d.wait(ctx)
		cancel()
		if len(d.inflight) > 0 {
			return
		}
	}
	for _, p := range d.pipes {
		d.m.void(p.state, d.s.release)
	}
	for _, b := range d.place.bufs {
		d.m.void(b.(*mtlBuf).id, d.s.release)
	}
	for _, id := range []objc.ID{d.lib, d.lib8, d.queue, d.dev} {
		if id != 0 {
			d.m.void(id, d.s.release)
		}
	}
	d.pipes, d.place.regions, d.place.bufs, d.lib, d.lib8, d.queue, d.dev = nil, nil, nil, 0, 0, 0, 0
}
