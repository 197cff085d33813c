package app

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego/objc"

	"github.com/startlux/startlux/app/icon"
)

// AppKit must run on the main thread: keep the main goroutine on it.
func init() { runtime.LockOSThread() }

// AppKit constants.
const (
	nsApplicationActivationPolicyAccessory = 1
	nsVariableStatusItemLength             = -1.0
	nsControlStateValueOn                  = 1
	nsControlStateValueOff                 = 0
)

// nsSize is NSSize (two CGFloats).
type nsSize struct{ W, H float64 }

// RunTray shows the controller's menu from an NSStatusItem in the menu bar
// and runs the AppKit event loop until ctx ends or the quit action runs.
// Call it from the main goroutine (this package locks it to the main
// thread).
func RunTray(ctx context.Context, ctrl *Controller) error {
	if err := frameworks(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &darwinTray{clicks: clicks{ctx: ctx, ctrl: ctrl}}

	target, err := newTarget(v)
	if err != nil {
		return err
	}
	pool := class("NSAutoreleasePool").Send(sel("new"))
	app := class("NSApplication").Send(sel("sharedApplication"))
	app.Send(sel("setActivationPolicy:"), nsApplicationActivationPolicyAccessory)

	bar := class("NSStatusBar").Send(sel("systemStatusBar"))
	v.item = bar.Send(sel("statusItemWithLength:"), float64(nsVariableStatusItemLength))
	v.item.Send(sel("retain"))
	img, err := menuBarImage()
	if err != nil {
		return err
	}
	button := v.item.Send(sel("button"))
	button.Send(sel("setImage:"), img)
	v.menu = class("NSMenu").Send(sel("alloc")).Send(sel("initWithTitle:"), nsString("StartLux"))
	v.menu.Send(sel("setAutoenablesItems:"), false)
	v.item.Send(sel("setMenu:"), v.menu)
	v.target = target
	v.show(ctrl.Menu())
	pool.Send(sel("drain"))

	ctrl.OnChange(func(m Menu) {
		v.mu.Lock()
		v.pending = &m
		v.mu.Unlock()
		target.Send(sel("performSelectorOnMainThread:withObject:waitUntilDone:"), sel("refresh:"), objc.ID(0), false)
	})
	go func() {
		<-ctx.Done()
		ctrl.sys.Stop()
		target.Send(sel("performSelectorOnMainThread:withObject:waitUntilDone:"), sel("quit:"), objc.ID(0), false)
	}()
	app.Send(sel("run"))
	return nil
}

// menuBarImage returns the template image for the status item: the
// bundle's MenuBarTemplate (@1x and @2x) when there is one, else drawn now.
func menuBarImage() (objc.ID, error) {
	img := class("NSImage").Send(sel("imageNamed:"), nsString("MenuBarTemplate"))
	if img == 0 {
		png, err := icon.PNG(icon.Template(36))
		if err != nil {
			return 0, err
		}
		data := class("NSData").Send(sel("dataWithBytes:length:"), unsafe.Pointer(&png[0]), uint(len(png)))
		runtime.KeepAlive(png)
		img = class("NSImage").Send(sel("alloc")).Send(sel("initWithData:"), data)
		if img == 0 {
			return 0, fmt.Errorf("NSImage could not read the menu-bar image")
		}
		img.Send(sel("setSize:"), nsSize{18, 18})
	}
	img.Send(sel("setTemplate:"), true)
	return img, nil
}

// targetClass is registered once per process.
var targetClass = sync.OnceValues(func() (objc.Class, error) {
	return objc.RegisterClass("StartLuxMenuTarget", objc.GetClass("NSObject"), nil, nil, []objc.MethodDef{
		{Cmd: sel("itemClicked:"), Fn: func(self objc.ID, _ objc.SEL, sender objc.ID) {
			// The menu is rebuilt on the main thread, where clicks arrive
			// too, so a tag is always a position in the current menu.
			trayOf(self).click(0, objc.Send[int](sender, sel("tag")))
		}},
		{Cmd: sel("refresh:"), Fn: func(self objc.ID, _ objc.SEL, _ objc.ID) {
			trayOf(self).refresh()
		}},
		{Cmd: sel("quit:"), Fn: func(self objc.ID, _ objc.SEL, _ objc.ID) {
			class("NSApplication").Send(sel("sharedApplication")).Send(sel("terminate:"), objc.ID(0))
		}},
	})
})

// trays maps target objects to their views (the Objective-C object cannot
// hold a Go pointer).
var trays sync.Map // objc.ID → *darwinTray

func trayOf(id objc.ID) *darwinTray {
	v, _ := trays.Load(id)
	return v.(*darwinTray)
}

func newTarget(v *darwinTray) (objc.ID, error) {
	cls, err := targetClass()
	if err != nil {
		return 0, fmt.Errorf("register the menu target class: %w", err)
	}
	t := objc.ID(cls).Send(sel("alloc")).Send(sel("init"))
	trays.Store(t, v)
	return t, nil
}

// darwinTray renders menus into an NSMenu; everything but pending is
// touched on the main thread only.
type darwinTray struct {
	clicks
	item, menu, target objc.ID

	mu      sync.Mutex // guards pending
	pending *Menu
}

// refresh shows the latest pending menu (main thread).
func (v *darwinTray) refresh() {
	v.mu.Lock()
	m := v.pending
	v.pending = nil
	v.mu.Unlock()
	if m != nil {
		withPool(func() { v.show(*m) })
	}
}

// show rebuilds the NSMenu from m (main thread).
func (v *darwinTray) show(m Menu) {
	v.item.Send(sel("button")).Send(sel("setToolTip:"), nsString(m.Tooltip))
	flat := flatten(m.Items)
	v.set(flat)
	v.menu.Send(sel("removeAllItems"))
	menus := map[int]objc.ID{-1: v.menu}
	for i, f := range flat {
		parent := menus[f.parent]
		if f.Separator {
			parent.Send(sel("addItem:"), class("NSMenuItem").Send(sel("separatorItem")))
			continue
		}
		key := ""
		if f.Action == ActionQuit {
			key = "q"
		}
		it := class("NSMenuItem").Send(sel("alloc")).Send(sel("initWithTitle:action:keyEquivalent:"),
			nsString(f.Title), sel("itemClicked:"), nsString(key))
		it.Send(sel("setTarget:"), v.target)
		it.Send(sel("setTag:"), i)
		it.Send(sel("setEnabled:"), f.Enabled || len(f.Children) > 0)
		if f.Checkable {
			state := nsControlStateValueOff
			if f.Checked {
				state = nsControlStateValueOn
			}
			it.Send(sel("setState:"), state)
		}
		if len(f.Children) > 0 {
			sub := class("NSMenu").Send(sel("alloc")).Send(sel("initWithTitle:"), nsString(f.Title))
			sub.Send(sel("setAutoenablesItems:"), false)
			it.Send(sel("setSubmenu:"), sub)
			sub.Send(sel("release"))
			menus[i] = sub
		}
		parent.Send(sel("addItem:"), it)
		it.Send(sel("release"))
	}
}
