package app

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/startlux/startlux/internal/objcrt"
)

// appObjC is the Objective-C side of the app: the runtime, with AppKit and
// ServiceManagement loaded, and the selectors and classes the app sends
// to, resolved once. Read-only after loadObjC.
type appObjC struct {
	*objcrt.Runtime
	sel appSels
	cls appClasses
	// smDomains are the error domains of Service Management's NSErrors,
	// read from the framework's constants (SMErrors.h
	// kSMErrorDomainFramework; SMAppService.h SMAppServiceErrorDomain,
	// macOS 15).
	smDomains []string
}

// appSels are the selectors of AppKit, ServiceManagement and Foundation the
// app sends (each checked against its SDK header: NSApplication.h,
// NSStatusBar.h, NSStatusItem.h, NSMenu.h, NSMenuItem.h, NSImage.h,
// NSData.h, NSObject.h, SMAppService.h).
type appSels struct {
	alloc, init, retain, release, new,
	sharedApplication, setActivationPolicy, run, terminate,
	systemStatusBar, statusItemWithLength, button, setImage, setMenu, setToolTip,
	initWithTitle, setAutoenablesItems, removeAllItems, addItem,
	separatorItem, initWithTitleActionKey, setTarget, setTag, tag, setEnabled, setState, setSubmenu,
	imageNamed, initWithData, setSize, setTemplate, dataWithBytesLength,
	performOnMain, itemClicked, refresh, quit,
	agentService, mainAppService, status, register, unregister, openLoginItems objc.SEL
}

// appClasses are the classes the app sends class messages to; SMAppService
// is 0 before macOS 13.
type appClasses struct {
	NSApplication, NSStatusBar, NSMenu, NSMenuItem, NSImage, NSData, SMAppService objc.ID
}

// loadObjC loads AppKit and ServiceManagement once, so their classes are
// known to the Objective-C runtime, and resolves the app's selectors.
var loadObjC = sync.OnceValues(func() (*appObjC, error) {
	rt, err := objcrt.Load()
	if err != nil {
		return nil, err
	}
	var sm uintptr
	for _, fw := range []string{
		"/System/Library/Frameworks/AppKit.framework/AppKit",
		"/System/Library/Frameworks/ServiceManagement.framework/ServiceManagement",
	} {
		h, err := purego.Dlopen(fw, purego.RTLD_GLOBAL|purego.RTLD_NOW)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", fw, err)
		}
		sm = h
	}
	var domains []string
	rt.Pool(func() {
		for _, name := range []string{"kSMErrorDomainFramework", "SMAppServiceErrorDomain"} {
			// Each is a constant CFStringRef (toll-free bridged to
			// NSString); the symbol is the variable's address.
			if p, err := purego.Dlsym(sm, name); err == nil && p != 0 {
				// p holds the address of a CFStringRef; read it as one.
				if d := rt.GoString(**(**objc.ID)(unsafe.Pointer(&p))); d != "" {
					domains = append(domains, d)
				}
			}
		}
	})
	r := objc.RegisterName
	c := func(name string) objc.ID { return objc.ID(objc.GetClass(name)) }
	return &appObjC{
		Runtime:   rt,
		smDomains: domains,
		sel: appSels{
			alloc: r("alloc"), init: r("init"), retain: r("retain"), release: r("release"), new: r("new"),
			sharedApplication: r("sharedApplication"), setActivationPolicy: r("setActivationPolicy:"),
			run: r("run"), terminate: r("terminate:"),
			systemStatusBar: r("systemStatusBar"), statusItemWithLength: r("statusItemWithLength:"),
			button: r("button"), setImage: r("setImage:"), setMenu: r("setMenu:"), setToolTip: r("setToolTip:"),
			initWithTitle: r("initWithTitle:"), setAutoenablesItems: r("setAutoenablesItems:"),
			removeAllItems: r("removeAllItems"), addItem: r("addItem:"),
			separatorItem: r("separatorItem"), initWithTitleActionKey: r("initWithTitle:action:keyEquivalent:"),
			setTarget: r("setTarget:"), setTag: r("setTag:"), tag: r("tag"), setEnabled: r("setEnabled:"),
			setState: r("setState:"), setSubmenu: r("setSubmenu:"),
			imageNamed: r("imageNamed:"), initWithData: r("initWithData:"), setSize: r("setSize:"),
			setTemplate: r("setTemplate:"), dataWithBytesLength: r("dataWithBytes:length:"),
			performOnMain: r("performSelectorOnMainThread:withObject:waitUntilDone:"),
			itemClicked:   r("itemClicked:"), refresh: r("refresh:"), quit: r("quit:"),
			agentService: r("agentServiceWithPlistName:"), mainAppService: r("mainAppService"),
			status: r("status"), register: r("registerAndReturnError:"), unregister: r("unregisterAndReturnError:"),
			openLoginItems: r("openSystemSettingsLoginItems"),
		},
		cls: appClasses{
			NSApplication: c("NSApplication"), NSStatusBar: c("NSStatusBar"), NSMenu: c("NSMenu"),
			NSMenuItem: c("NSMenuItem"), NSImage: c("NSImage"), NSData: c("NSData"),
			SMAppService: c("SMAppService"),
		},
	}, nil
})
