//go:build darwin

package objcrt

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// Runtime is the loaded Objective-C runtime: objc_msgSend's address, the
// autorelease pool entry points and the typed senders every caller needs.
// Its fields are set once by [Load] and read-only afterwards.
type Runtime struct {
	msgSend  uintptr
	poolPush func() uintptr
	poolPop  func(uintptr)

	// Typed objc_msgSend for the common shapes of a message with no
	// arguments (or one), each registered once.
	SendUint   func(objc.ID, objc.SEL) uint
	SendUint64 func(objc.ID, objc.SEL) uint64
	SendInt    func(objc.ID, objc.SEL) int
	SendBool   func(objc.ID, objc.SEL) bool
	SendPtr    func(objc.ID, objc.SEL) unsafe.Pointer
	// SendBoolInt is a BOOL method taking one NSInteger (supportsFamily:).
	SendBoolInt func(objc.ID, objc.SEL, int) bool
	// SendBoolPtr is a BOOL method taking one pointer, such as the
	// NSError ** of registerAndReturnError:.
	SendBoolPtr func(objc.ID, objc.SEL, unsafe.Pointer) bool

	selUTF8, selStringWithUTF8, selDescription, selDomain, selCode objc.SEL
	nsStringClass                                                  objc.ID
}

// Load returns the process's runtime, loading libobjc and Foundation the
// first time.
var Load = sync.OnceValues(func() (*Runtime, error) {
	lib, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("objcrt: load libobjc: %w", err)
	}
	if _, err := purego.Dlopen("/System/Library/Frameworks/Foundation.framework/Foundation", purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return nil, fmt.Errorf("objcrt: load Foundation: %w", err)
	}
	rt := &Runtime{}
	if rt.msgSend, err = purego.Dlsym(lib, "objc_msgSend"); err != nil {
		return nil, fmt.Errorf("objcrt: %w", err)
	}
	purego.RegisterLibFunc(&rt.poolPush, lib, "objc_autoreleasePoolPush")
	purego.RegisterLibFunc(&rt.poolPop, lib, "objc_autoreleasePoolPop")
	Register(rt, &rt.SendUint)
	Register(rt, &rt.SendUint64)
	Register(rt, &rt.SendInt)
	Register(rt, &rt.SendBool)
	Register(rt, &rt.SendPtr)
	Register(rt, &rt.SendBoolInt)
	Register(rt, &rt.SendBoolPtr)
	rt.selUTF8 = objc.RegisterName("UTF8String")
	rt.selStringWithUTF8 = objc.RegisterName("stringWithUTF8String:")
	rt.selDescription = objc.RegisterName("localizedDescription")
	rt.selDomain = objc.RegisterName("domain")
	rt.selCode = objc.RegisterName("code")
	rt.nsStringClass = objc.ID(objc.GetClass("NSString"))
	if rt.nsStringClass == 0 {
		return nil, fmt.Errorf("objcrt: no NSString class")
	}
	return rt, nil
})

// Register makes *fn call objc_msgSend with fn's signature: the receiver
// and selector first, then the method's arguments. Call it once, when
// setting up; the returned function is cheap to call. Struct returns
// larger than 16 bytes (objc_msgSend_stret on amd64) are not supported.
func Register[F any](rt *Runtime, fn *F) {
	purego.RegisterFunc(fn, rt.msgSend)
}

// Pool runs f inside an autorelease pool on one OS thread, so that the
// autoreleased objects f receives are released when it returns (objects f
// keeps must be retained). Every path that sends Objective-C messages runs
// inside one: Go's threads never exit, so without a pool autoreleased
// objects would pile up for the life of the process. Pools nest.
func (rt *Runtime) Pool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := rt.poolPush()
	defer rt.poolPop(p)
	f()
}

// NSString returns an autoreleased NSString holding s; call it inside a
// [Runtime.Pool].
func (rt *Runtime) NSString(s string) objc.ID {
	b := append([]byte(s), 0)
	id := rt.nsStringClass.Send(rt.selStringWithUTF8, unsafe.Pointer(&b[0]))
	runtime.KeepAlive(b)
	return id
}

// GoString copies an NSString into a Go string ("" for nil).
func (rt *Runtime) GoString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	p := (*byte)(rt.SendPtr(ns, rt.selUTF8))
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// Error reads an NSError (nil for a nil object); call it inside the pool
// that received the error.
func (rt *Runtime) Error(nserr objc.ID) *NSError {
	if nserr == 0 {
		return nil
	}
	return &NSError{
		Domain: rt.GoString(nserr.Send(rt.selDomain)),
		Code:   rt.SendInt(nserr, rt.selCode),
		Text:   rt.GoString(nserr.Send(rt.selDescription)),
	}
}
