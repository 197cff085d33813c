package metal

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"
)

//go:embed emu/prelude.h
var emuPrelude string

//go:embed emu/runtime.cpp
var emuRuntime string

//go:embed emu/metal_tensor.h
var emuTensorHeader string

//go:embed emu/mpp.h
var emuMPPHeader string

// emuMPPPath is where the kernels include Metal Performance Primitives from.
const emuMPPPath = "MetalPerformancePrimitives/MetalPerformancePrimitives.h"

// emuCompilers are tried in order when Options.Compiler is empty.
var emuCompilers = []string{"clang++-19", "/usr/bin/clang++-19", "clang++"}

// emuFlags are the compiler flags of both translation units.
var emuFlags = []string{"-std=c++20", "-O2", "-fPIC", "-w", "-fno-strict-aliasing", "-ffp-contract=off"}

// emuLib is a loaded emulator library.
type emuLib struct {
	dispatch uintptr
	entries  map[string]uintptr
	// cxx is the compiler it was built with and root the cache directory
	// above it (the int8 probe compiles with the same, and is cached there).
	cxx, root string
}

// findCompiler returns the C++ compiler to use.
func findCompiler(opt string) (string, error) {
	if opt != "" {
		p, err := exec.LookPath(opt)
		if err != nil {
			return "", fmt.Errorf("metal emulator: compiler %q: %w", opt, err)
		}
		return p, nil
	}
	for _, c := range emuCompilers {
		if p, err := exec.LookPath(c); err == nil {
			if c == "clang++" && !isClang19(p) {
				continue
			}
			return p, nil
		}
	}
	return "", ErrNoCompiler
}

// ErrNoCompiler is returned by [NewEmulated] when no clang 19 is found.
var ErrNoCompiler = errors.New("metal emulator: clang-19 not found (install clang-19, e.g. apt-get install clang-19, or set Options.Compiler)")

func isClang19(path string) bool {
	out, err := exec.Command(path, "--version").Output()
	return err == nil && strings.Contains(string(out), "version 19.")
}

// buildEmu compiles (or finds in the cache) the emulator library for the
// embedded kernels (the float library, then the int8 one), plus extra
// kernel source (tests), and loads it.
func buildEmu(ctx context.Context, opts Options, extra string) (*emuLib, []kernelEntry, error) {
	src, err := librarySource()
	if err != nil {
		return nil, nil, err
	}
	src8, err := int8LibrarySource()
	if err != nil {
		return nil, nil, err
	}
	src += src8 + extra
	ks, err := parseKernels(src)
	if err != nil {
		return nil, nil, fmt.Errorf("metal emulator: parse kernels: %w", err)
	}
	cxx, err := findCompiler(opts.Compiler)
	if err != nil {
		return nil, nil, err
	}
	unit := src + "\n// ---- generated entries ----\n" + emuEntries(ks)
	h := sha256.New()
	for _, s := range []string{cxx, strings.Join(emuFlags, " "), emuPrelude, emuTensorHeader, emuMPPHeader, emuRuntime, unit, runtime.GOOS, runtime.GOARCH} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]
	dir := opts.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil || base == "" {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "startlux", "metal-emu")
	}
	dir = filepath.Join(dir, key)
	lib := filepath.Join(dir, "kernels.so")
	if _, err := os.Stat(lib); err != nil {
		if err := compileEmu(ctx, cxx, dir, lib, unit); err != nil {
			return nil, nil, err
		}
	}
	// Opening the same path again returns the loaded library (the dynamic
	// loader counts references), so backends in one process share it.
	l, err := loadEmu(lib, ks)
	if err != nil {
		return nil, nil, err
	}
	l.cxx, l.root = cxx, filepath.Dir(dir)
	return l, ks, nil
}

// emuHeaders are the headers the kernels include, by path under the
// include directory: the prelude as <metal_stdlib>, <metal_tensor> and,
// unless mpp is false (an SDK without it), Metal Performance Primitives.
func emuHeaders(mpp bool) map[string]string {
	h := map[string]string{
		"metal_stdlib": "#pragma once\n" + emuPrelude,
		"metal_tensor": emuTensorHeader,
	}
	if mpp {
		h[emuMPPPath] = emuMPPHeader
	}
	return h
}

// writeFiles writes files (by path under dir), making their directories.
func writeFiles(dir string, files map[string]string) error {
	for p, s := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("metal emulator: %w", err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return fmt.Errorf("metal emulator: %w", err)
		}
	}
	return nil
}

// compileEmu builds the library in a fresh temporary directory and renames
// it into place, so that concurrent builds never see a partial file.
func compileEmu(ctx context.Context, cxx, dir, lib, unit string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("metal emulator: cache dir: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("metal emulator: cache dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	inc := filepath.Join(tmp, "include")
	if err := writeFiles(inc, emuHeaders(true)); err != nil {
		return err
	}
	if err := writeFiles(tmp, map[string]string{"kernels.cpp": unit, "runtime.cpp": emuRuntime}); err != nil {
		return err
	}
	// The two translation units compile in parallel, then link.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"kernels", "runtime"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append([]string{}, emuFlags...), "-I", inc, "-c", "-o", filepath.Join(tmp, name+".o"), filepath.Join(tmp, name+".cpp"))
			out, err := exec.CommandContext(ctx, cxx, args...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("metal emulator: compile %s.cpp: %w\n%s", name, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	so := filepath.Join(tmp, "kernels.so")
	out, err := exec.CommandContext(ctx, cxx, "-shared", "-o", so, filepath.Join(tmp, "kernels.o"), filepath.Join(tmp, "runtime.o"), "-lpthread").CombinedOutput()
	if err != nil {
		return fmt.Errorf("metal emulator: link: %w\n%s", err, out)
	}
	if err := os.Rename(so, lib); err != nil {
		return fmt.Errorf("metal emulator: %w", err)
	}
	pruneEmuCache(filepath.Dir(dir), emuCacheKeep)
	return nil
}

// emuCacheKeep is how many built libraries the cache keeps.
const emuCacheKeep = 8

// pruneEmuCache removes all but the keep most recently built libraries of
// the cache. A process that still has a removed library loaded keeps it.
func pruneEmuCache(root string, keep int) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type built struct {
		path string
		mod  int64
	}
	var libs []built
	for _, e := range ents {
		st, err := os.Stat(filepath.Join(root, e.Name(), "kernels.so"))
		if err != nil {
			continue // being built, or not ours
		}
		libs = append(libs, built{filepath.Join(root, e.Name()), st.ModTime().UnixNano()})
	}
	if len(libs) <= keep {
		return
	}
	sort.Slice(libs, func(i, j int) bool { return libs[i].mod > libs[j].mod })
	for _, l := range libs[keep:] {
		os.RemoveAll(l.path)
	}
}

// emuBuf is an emulator buffer: plain Go memory, which does not move.
// Buffers the emulator allocates sit between two guard zones of a known
// pattern, checked after every dispatch that binds them, so a kernel writing
// out of bounds is reported.
type emuBuf struct {
	data   []byte
	raw    []byte // guard + data + guard; nil for weights
	weight bool   // wraps a weight's own bytes: never written, never poisoned
}

const (
	emuGuard     = 256
	emuGuardByte = 0xa5
)

func newEmuBuf(size int) *emuBuf {
	size = max(size, 16)
	raw := make([]byte, size+2*emuGuard)
	for i := range emuGuard {
		raw[i] = emuGuardByte
		raw[len(raw)-1-i] = emuGuardByte
	}
	return &emuBuf{data: raw[emuGuard : emuGuard+size], raw: raw}
}

// guardIntact reports whether no kernel wrote into the guard zones.
func (e *emuBuf) guardIntact() bool {
	for i := range emuGuard {
		if e.raw[i] != emuGuardByte || e.raw[len(e.raw)-1-i] != emuGuardByte {
			return false
		}
	}
	return true
}

// emuDriver runs kernels on the CPU through the emulator library. Like a
// command buffer, dispatches are recorded and run only at wait, so the
// dispatch code meets the same asynchrony as on the GPU (a Write while work
// is queued goes through a staging copy; Free waits for the queue).
type emuDriver struct {
	lib   *emuLib
	queue []emuCall
	frees []*emuBuf
	err   error
	args  [32]uintptr
	errb  [512]byte
	dims  [6]uint32
	// place, when set, makes the driver place weights as a device with
	// place.lim would; nil aliases every weight's bytes.
	place *placement
	// dev is what the emulated device lacks (tests).
	dev emuDevice
	// faults are the faults a test injects (Options.Faults; nil: none).
	faults *Faults
}

// emuDevice models, for tests, an emulated device short of what the int8
// kernels need. The zero value is a GPU with neural accelerators and an SDK
// with Metal Performance Primitives (an M5 on macOS 26).
type emuDevice struct {
	// noAccelerators models a GPU without neural accelerators (before
	// MTLGPUFamilyApple10).
	noAccelerators bool
	// noMPP models an SDK without Metal Performance Primitives: the int8
	// probe then fails to compile, with clang's message.
	noMPP bool
	// int8Fault makes every mm_i8 dispatch flip the lowest bit of its
	// first output element, as a GPU computing int8 wrongly would.
	int8Fault bool
}

var _ int8Driver = (*emuDriver)(nil)

// emuCall is one recorded dispatch.
type emuCall struct {
	kernel          string
	groups, threads [3]int
	binds           []binding
}

func (d *emuDriver) name() string { return "metal-emu" }

func (d *emuDriver) alloc(size int) (buffer, error) {
	if d.place != nil {
		if err := checkBuffer(size, d.place.lim); err != nil {
			return nil, fmt.Errorf("metal emulator: %w", err)
		}
	}
	// Keep at least 16 bytes so that every buffer has an address.
	return newEmuBuf(size), nil
}

// mapRegion follows the device's decision when the driver models one.
func (d *emuDriver) mapRegion(data []byte) error {
	if d.place == nil || len(data) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	if plan := planRegion(start, len(data), d.place.lim); plan.reason != "" {
		d.place.decline(plan.reason)
		return nil
	}
	d.place.addRegion(start, len(data), &emuBuf{data: data, weight: true})
	return nil
}

func (d *emuDriver) host(b buffer) []byte { return b.(*emuBuf).data }

// free poisons and drops the buffer once the queued work has run, so that
// a use after Free shows up as NaNs.
func (d *emuDriver) free(b buffer) {
	e := b.(*emuBuf)
	if e.weight {
		return
	}
	if len(d.queue) == 0 {
		poison(e.data)
		return
	}
	d.frees = append(d.frees, e)
}

// scrub poisons a freed buffer kept for reuse (see memPool).
func (d *emuDriver) scrub(b buffer) {
	if e := b.(*emuBuf); !e.weight {
		poison(e.data)
	}
}

func poison(data []byte) {
	for i := 0; i+4 <= len(data); i += 4 {
		data[i], data[i+1], data[i+2], data[i+3] = 0x00, 0x00, 0xc0, 0x7f // quiet NaN
	}
}

func (d *emuDriver) weight(data []byte, align int) (buffer, int, error) {
	if len(data) == 0 {
		return newEmuBuf(16), 0, nil
	}
	if d.place == nil {
		return &emuBuf{data: data, weight: true}, 0, nil
	}
	i, off, err := planWeight(uintptr(unsafe.Pointer(&data[0])), len(data), align, d.place.regions, d.place.lim)
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("metal emulator: %w", err)
	case i >= 0:
		d.place.inRegion++
		return d.place.bufs[i], off, nil
	}
	d.place.copied++
	return &emuBuf{data: append([]byte(nil), data...), weight: true}, 0, nil
}

func (d *emuDriver) idle() bool { return len(d.queue) == 0 }

func (d *emuDriver) dispatch(kernel string, groups, threads [3]int, binds []binding) {
	d.queue = append(d.queue, emuCall{kernel, groups, threads, binds})
}

// run runs one recorded dispatch.
func (d *emuDriver) run(kernel string, groups, threads [3]int, binds []binding) {
	if d.err != nil {
		return
	}
	entry, ok := d.lib.entries[kernel]
	if !ok {
		d.err = fmt.Errorf("metal emulator: no kernel %q", kernel)
		return
	}
	for i := range d.args {
		d.args[i] = 0
	}
	var pins []any
	for _, b := range binds {
		var p []byte
		if b.bytes != nil {
			p = b.bytes
		} else {
			p = b.buf.(*emuBuf).data[b.off:]
		}
		if len(p) == 0 {
			p = make([]byte, 16)
		}
		pins = append(pins, p)
		d.args[b.index] = uintptr(unsafe.Pointer(&p[0]))
	}
	for i := range 3 {
		d.dims[i] = uint32(groups[i])
		d.dims[3+i] = uint32(threads[i])
	}
	rc := callDispatch(d.lib.dispatch, entry, &d.args[0], &d.dims[0], &d.dims[3], &d.errb[0], len(d.errb))
	runtime.KeepAlive(pins)
	for _, b := range binds {
		if e, ok := b.buf.(*emuBuf); ok && e.raw != nil && !e.guardIntact() {
			d.err = fmt.Errorf("metal emulator: kernel %s wrote outside the buffer bound at index %d", kernel, b.index)
			return
		}
	}
	if rc != 0 {
		msg := d.errb[:]
		if i := strings.IndexByte(string(msg), 0); i >= 0 {
			msg = msg[:i]
		}
		d.err = fmt.Errorf("metal emulator: kernel %s: %s", kernel, msg)
		return
	}
	if d.dev.int8Fault && strings.HasPrefix(kernel, "mm_i8_") {
		for _, b := range binds {
			if b.index == 0 {
				b.buf.(*emuBuf).data[b.off] ^= 1
			}
		}
	}
}

func (d *emuDriver) wait(ctx context.Context) error {
	for len(d.queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := d.queue[0]
		if !d.runFaulty(ctx, c) {
			return ctx.Err()
		}
		d.queue[0] = emuCall{}
		d.queue = d.queue[1:]
	}
	d.queue = nil
	for _, b := range d.frees {
		poison(b.data)
	}
	d.frees = nil
	err := d.err
	d.err = nil
	return err
}

func (d *emuDriver) close() {}

// neuralAccelerators reports what the emulated device models: an M5-class
// GPU unless a test says otherwise.
func (d *emuDriver) neuralAccelerators() bool { return !d.dev.noAccelerators }

// compileInt8Probe compiles the probe source as the kernels are compiled
// (clang, the prelude, the emulated <metal_tensor> and Metal Performance
// Primitives headers), checking it only (-fsyntax-only): the emulator runs
// nothing of the probe. A probe that compiled is remembered in the cache.
func (d *emuDriver) compileInt8Probe(ctx context.Context, src string) error {
	mpp := !d.dev.noMPP
	args := append(append([]string{}, emuFlags...), "-fsyntax-only", "-x", "c++", "-I", "include", "int8_probe.metal")
	h := sha256.New()
	for _, s := range []string{d.lib.cxx, strings.Join(args, " "), emuPrelude, emuTensorHeader, fmt.Sprint(mpp), emuMPPHeader, src} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	mark := filepath.Join(d.lib.root, "probes", hex.EncodeToString(h.Sum(nil))[:24]+".ok")
	if _, err := os.Stat(mark); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(mark), 0o755); err != nil {
		return fmt.Errorf("metal emulator: cache dir: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(mark), "probe-")
	if err != nil {
		return fmt.Errorf("metal emulator: cache dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := writeFiles(filepath.Join(tmp, "include"), emuHeaders(mpp)); err != nil {
		return err
	}
	if err := writeFiles(tmp, map[string]string{"int8_probe.metal": src}); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, d.lib.cxx, args...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errors.New(compilerMessage(string(out)))
	}
	return os.WriteFile(mark, nil, 0o644)
}

// compileInt8 checks that the emulator library holds the int8 kernels
// (buildEmu compiled them with the float ones).
func (d *emuDriver) compileInt8(ctx context.Context, src string, kernels []string) error {
	for _, k := range kernels {
		if _, ok := d.lib.entries[k]; !ok {
			return fmt.Errorf("metal emulator: no kernel %q in the library", k)
		}
	}
	return nil
}
