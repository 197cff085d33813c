package app

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// frameworks loads AppKit and ServiceManagement once, so their classes are
// known to the Objective-C runtime.
var frameworks = sync.OnceValue(func() error {
	for _, fw := range []string{
		"/System/Library/Frameworks/AppKit.framework/AppKit",
		"/System/Library/Frameworks/ServiceManagement.framework/ServiceManagement",
	} {
		if _, err := purego.Dlopen(fw, purego.RTLD_GLOBAL|purego.RTLD_NOW); err != nil {
			return fmt.Errorf("load %s: %w", fw, err)
		}
	}
	return nil
})

func sel(name string) objc.SEL { return objc.RegisterName(name) }

func class(name string) objc.ID { return objc.ID(objc.GetClass(name)) }

// nsString returns an autoreleased NSString holding s.
func nsString(s string) objc.ID {
	b := append([]byte(s), 0)
	id := class("NSString").Send(sel("stringWithUTF8String:"), unsafe.Pointer(&b[0]))
	runtime.KeepAlive(b)
	return id
}

// goString copies an NSString into a Go string ("" for nil).
func goString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	p := objc.Send[*byte](ns, sel("UTF8String"))
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// withPool runs f inside an autorelease pool on one OS thread, so the
// autoreleased objects f makes are freed when it returns.
func withPool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := class("NSAutoreleasePool").Send(sel("new"))
	defer pool.Send(sel("drain"))
	f()
}

// nsErrorText returns an NSError's localized description.
func nsErrorText(e objc.ID) string {
	if e == 0 {
		return "unknown error"
	}
	return goString(e.Send(sel("localizedDescription")))
}
