//go:build darwin && arm64

package metal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/startlux/startlux/tensor"
)

// This file is the Metal device binding. It is compiled for darwin/arm64
// only and has never run in this project's CI (which has no Mac); see
// docs/metal.md.

// New returns the Metal backend on the GPU picked by opts.Device among
// MTLCopyAllDevices (MTLCreateSystemDefaultDevice returns nil in a daemon).
func New(opts Options) (tensor.Backend, error) {
	d, err := newMTLDriver(opts)
	if err != nil {
		return nil, err
	}
	return &Backend{drv: d}, nil
}

type mtlSize struct{ W, H, D uint }

// MTLResourceStorageModeShared | MTLResourceHazardTrackingModeDefault.
const mtlStorageShared = 0

// Command buffer status values (MTLCommandBufferStatus).
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

type sels struct {
	count, objectAtIndex, retain, release, alloc, init, stringWithUTF8String, utf8String,
	localizedDescription, newCommandQueue, newLibraryWithSource, setFastMathEnabled,
	newFunctionWithName, newComputePipelineState, maxTotalThreads, newBufferWithLength,
	newBufferNoCopy, newBufferWithBytes, contents, commandBuffer, computeCommandEncoder,
	setComputePipelineState, setBuffer, setBytes, dispatchThreadgroups, endEncoding, commit,
	status, errorSel, name objc.SEL
}

type mtlDriver struct {
	s         sels
	poolPush  func() uintptr
	poolPop   func(uintptr)
	dev       objc.ID
	queue     objc.ID
	lib       objc.ID
	pipes     map[string]pipeline
	cmd, enc  objc.ID
	nDispatch int
	inflight  []objc.ID
	pending   []*mtlBuf
	regions   []region
	err       error
}

// region is a page-aligned span of memory (an mmap'd checkpoint file)
// wrapped once without a copy; weights inside it are served as offsets.
type region struct {
	start, end uintptr
	buf        *mtlBuf
}

func newMTLDriver(opts Options) (*mtlDriver, error) {
	metalLib, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("metal: load Metal.framework: %w", err)
	}
	if _, err := purego.Dlopen("/System/Library/Frameworks/Foundation.framework/Foundation", purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return nil, fmt.Errorf("metal: load Foundation.framework: %w", err)
	}
	objcLib, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("metal: load libobjc: %w", err)
	}
	var copyAllDevices func() objc.ID
	purego.RegisterLibFunc(&copyAllDevices, metalLib, "MTLCopyAllDevices")
	d := &mtlDriver{pipes: map[string]pipeline{}}
	purego.RegisterLibFunc(&d.poolPush, objcLib, "objc_autoreleasePoolPush")
	purego.RegisterLibFunc(&d.poolPop, objcLib, "objc_autoreleasePoolPop")
	r := objc.RegisterName
	d.s = sels{
		count: r("count"), objectAtIndex: r("objectAtIndex:"), retain: r("retain"), release: r("release"),
		alloc: r("alloc"), init: r("init"), stringWithUTF8String: r("stringWithUTF8String:"), utf8String: r("UTF8String"),
		localizedDescription: r("localizedDescription"), newCommandQueue: r("newCommandQueue"),
		newLibraryWithSource: r("newLibraryWithSource:options:error:"), setFastMathEnabled: r("setFastMathEnabled:"),
		newFunctionWithName: r("newFunctionWithName:"), newComputePipelineState: r("newComputePipelineStateWithFunction:error:"),
		maxTotalThreads: r("maxTotalThreadsPerThreadgroup"), newBufferWithLength: r("newBufferWithLength:options:"),
		newBufferNoCopy: r("newBufferWithBytesNoCopy:length:options:deallocator:"), newBufferWithBytes: r("newBufferWithBytes:length:options:"),
		contents: r("contents"), commandBuffer: r("commandBuffer"), computeCommandEncoder: r("computeCommandEncoder"),
		setComputePipelineState: r("setComputePipelineState:"), setBuffer: r("setBuffer:offset:atIndex:"),
		setBytes: r("setBytes:length:atIndex:"), dispatchThreadgroups: r("dispatchThreadgroups:threadsPerThreadgroup:"),
		endEncoding: r("endEncoding"), commit: r("commit"), status: r("status"), errorSel: r("error"), name: r("name"),
	}

	var ferr error
	d.withPool(func() {
		devs := copyAllDevices()
		if devs == 0 {
			ferr = errors.New("metal: MTLCopyAllDevices returned no devices")
			return
		}
		defer devs.Send(d.s.release)
		n := objc.Send[uint](devs, d.s.count)
		if opts.Device < 0 || uint(opts.Device) >= n {
			ferr = fmt.Errorf("metal: device %d requested, %d available", opts.Device, n)
			return
		}
		d.dev = devs.Send(d.s.objectAtIndex, uint(opts.Device))
		d.dev.Send(d.s.retain)
		d.queue = d.dev.Send(d.s.newCommandQueue)
		if d.queue == 0 {
			ferr = errors.New("metal: newCommandQueue failed")
			return
		}
		src, err := librarySource()
		if err != nil {
			ferr = err
			return
		}
		copts := objc.ID(objc.GetClass("MTLCompileOptions")).Send(d.s.alloc).Send(d.s.init)
		defer copts.Send(d.s.release)
		// Precise math: RoPE angles reach thousands of radians.
		copts.Send(d.s.setFastMathEnabled, false)
		var nserr objc.ID
		d.lib = d.dev.Send(d.s.newLibraryWithSource, d.nsString(src), copts, unsafe.Pointer(&nserr))
		if d.lib == 0 {
			ferr = fmt.Errorf("metal: compile kernels: %s", d.describe(nserr))
		}
	})
	if ferr != nil {
		d.close()
		return nil, ferr
	}
	return d, nil
}

// withPool runs f on one OS thread inside an autorelease pool, so that the
// autoreleased objects f receives (and retains where it keeps them) are
// drained.
func (d *mtlDriver) withPool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := d.poolPush()
	defer d.poolPop(p)
	f()
}

// nsString returns an autoreleased NSString; call inside withPool.
func (d *mtlDriver) nsString(s string) objc.ID {
	b := append([]byte(s), 0)
	id := objc.ID(objc.GetClass("NSString")).Send(d.s.stringWithUTF8String, unsafe.Pointer(&b[0]))
	runtime.KeepAlive(b)
	return id
}

func (d *mtlDriver) goString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	p := objc.Send[*byte](ns, d.s.utf8String)
	if p == nil {
		return ""
	}
	var out []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		out = append(out, *(*byte)(q))
	}
	return string(out)
}

func (d *mtlDriver) describe(nserr objc.ID) string {
	if nserr == 0 {
		return "unknown error"
	}
	return d.goString(nserr.Send(d.s.localizedDescription))
}

func (d *mtlDriver) name() string { return "metal" }

func (d *mtlDriver) wrap(id objc.ID, size int) (*mtlBuf, error) {
	if id == 0 {
		return nil, fmt.Errorf("metal: buffer of %d bytes not created", size)
	}
	return &mtlBuf{id: id, ptr: objc.Send[unsafe.Pointer](id, d.s.contents), size: size}, nil
}

func (d *mtlDriver) alloc(size int) (buffer, error) {
	size = max(size, 16)
	return d.wrap(d.dev.Send(d.s.newBufferWithLength, uint(size), uint(mtlStorageShared)), size)
}

func (d *mtlDriver) host(b buffer) []byte {
	m := b.(*mtlBuf)
	return unsafe.Slice((*byte)(m.ptr), m.size)
}

func (d *mtlDriver) free(b buffer) {
	m := b.(*mtlBuf)
	if d.idle() {
		m.id.Send(d.s.release)
		return
	}
	d.pending = append(d.pending, m)
}

// pageSize is the page size of Apple Silicon macOS.
const pageSize = 16384

// MapRegion registers a page-aligned span of memory, typically a whole
// mmap'd checkpoint file, so that weights inside it become offsets into one
// buffer made without a copy.
func (d *mtlDriver) mapRegion(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	if start%pageSize != 0 {
		return fmt.Errorf("metal: region at %#x is not page-aligned", start)
	}
	n := (len(data) + pageSize - 1) / pageSize * pageSize
	id := d.dev.Send(d.s.newBufferNoCopy, unsafe.Pointer(&data[0]), uint(n), uint(mtlStorageShared), uintptr(0))
	b, err := d.wrap(id, n)
	if err != nil {
		return err
	}
	d.regions = append(d.regions, region{start: start, end: start + uintptr(len(data)), buf: b})
	return nil
}

// weight wraps weight bytes: inside a registered region as an offset, as a
// buffer without a copy when the bytes are whole pages, else as a copy.
func (d *mtlDriver) weight(data []byte) (buffer, int, error) {
	if len(data) == 0 {
		b, err := d.alloc(16)
		return b, 0, err
	}
	p := uintptr(unsafe.Pointer(&data[0]))
	for _, r := range d.regions {
		if p >= r.start && p+uintptr(len(data)) <= r.end {
			return r.buf, int(p - r.start), nil
		}
	}
	if p%pageSize == 0 && len(data)%pageSize == 0 {
		b, err := d.wrap(d.dev.Send(d.s.newBufferNoCopy, unsafe.Pointer(&data[0]), uint(len(data)), uint(mtlStorageShared), uintptr(0)), len(data))
		return b, 0, err
	}
	b, err := d.wrap(d.dev.Send(d.s.newBufferWithBytes, unsafe.Pointer(&data[0]), uint(len(data)), uint(mtlStorageShared)), len(data))
	return b, 0, err
}

func (d *mtlDriver) idle() bool { return d.cmd == 0 && len(d.inflight) == 0 }

// pipeline returns the compute pipeline of a kernel, creating it once.
func (d *mtlDriver) pipeline(kernel string) (pipeline, error) {
	if p, ok := d.pipes[kernel]; ok {
		return p, nil
	}
	var p pipeline
	var perr error
	d.withPool(func() {
		fn := d.lib.Send(d.s.newFunctionWithName, d.nsString(kernel))
		if fn == 0 {
			perr = fmt.Errorf("metal: no kernel %q in the library", kernel)
			return
		}
		defer fn.Send(d.s.release)
		var nserr objc.ID
		p.state = d.dev.Send(d.s.newComputePipelineState, fn, unsafe.Pointer(&nserr))
		if p.state == 0 {
			perr = fmt.Errorf("metal: pipeline %s: %s", kernel, d.describe(nserr))
			return
		}
		p.maxThreads = int(objc.Send[uint](p.state, d.s.maxTotalThreads))
	})
	if perr != nil {
		return p, perr
	}
	d.pipes[kernel] = p
	return p, nil
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
		d.err = fmt.Errorf("metal: kernel %s: %d threads per group, the pipeline allows %d", kernel, n, p.maxThreads)
		return
	}
	d.withPool(func() {
		if d.cmd == 0 {
			d.cmd = d.queue.Send(d.s.commandBuffer)
			d.cmd.Send(d.s.retain)
		}
		if d.enc == 0 {
			d.enc = d.cmd.Send(d.s.computeCommandEncoder)
			d.enc.Send(d.s.retain)
		}
	})
	d.enc.Send(d.s.setComputePipelineState, p.state)
	for _, b := range binds {
		if b.bytes != nil {
			d.enc.Send(d.s.setBytes, unsafe.Pointer(&b.bytes[0]), uint(len(b.bytes)), uint(b.index))
			continue
		}
		d.enc.Send(d.s.setBuffer, b.buf.(*mtlBuf).id, uint(b.off), uint(b.index))
	}
	d.enc.Send(d.s.dispatchThreadgroups,
		mtlSize{uint(groups[0]), uint(groups[1]), uint(groups[2])},
		mtlSize{uint(threads[0]), uint(threads[1]), uint(threads[2])})
	d.nDispatch++
	if d.nDispatch >= dispatchesPerCommit {
		d.commit()
	}
}

// commit ends the current encoder and commits its command buffer.
func (d *mtlDriver) commit() {
	if d.enc != 0 {
		d.enc.Send(d.s.endEncoding)
		d.enc.Send(d.s.release)
		d.enc = 0
	}
	if d.cmd != 0 {
		d.cmd.Send(d.s.commit)
		d.inflight = append(d.inflight, d.cmd)
		d.cmd = 0
	}
	d.nDispatch = 0
}

func (d *mtlDriver) wait(ctx context.Context) error {
	d.commit()
	for len(d.inflight) > 0 {
		cb := d.inflight[0]
		for {
			st := objc.Send[uint](cb, d.s.status)
			if st >= mtlStatusCompleted {
				if st == mtlStatusError && d.err == nil {
					d.withPool(func() {
						d.err = fmt.Errorf("metal: command buffer failed: %s", d.describe(cb.Send(d.s.errorSel)))
					})
				}
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(50 * time.Microsecond)
		}
		cb.Send(d.s.release)
		d.inflight = d.inflight[1:]
	}
	for _, b := range d.pending {
		b.id.Send(d.s.release)
	}
	d.pending = nil
	err := d.err
	d.err = nil
	return err
}

func (d *mtlDriver) close() {
	if d.cmd != 0 || len(d.inflight) > 0 {
		_ = d.wait(context.Background())
	}
	for _, p := range d.pipes {
		p.state.Send(d.s.release)
	}
	for _, r := range d.regions {
		r.buf.id.Send(d.s.release)
	}
	for _, id := range []objc.ID{d.lib, d.queue, d.dev} {
		if id != 0 {
			id.Send(d.s.release)
		}
	}
	d.pipes, d.regions, d.lib, d.queue, d.dev = nil, nil, 0, 0, 0
}
