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
// Call it from the main goroutine, locked to the main thread by an init
// function of the program (AppKit runs there only); startlux-app does so.
// Other programs may import this package without their main goroutine
// being locked.
func RunTray(ctx context.Context, ctrl *Controller) error {
	oc, err := loadObjC()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &darwinTray{clicks: clicks{ctx: ctx, ctrl: ctrl}, oc: oc}

	target, err := newTarget(v)
	if err != nil {
		return err
	}
	v.target = target
	var app objc.ID
	oc.Pool(func() { app, err = v.setUp(ctrl.Menu()) })
	if err != nil {
		return err
	}
	s := &oc.sel
	// Menus arrive from the controller's goroutines and are shown on the
	// main thread; every hop is a message, so each runs in a pool.
	ctrl.OnChange(func(m Menu) {
		v.mu.Lock()
		v.pending = &m
		v.mu.Unlock()
		oc.Pool(func() { target.Send(s.performOnMain, s.refresh, objc.ID(0), false) })
	})
	go func() {
		<-ctx.Done()
		ctrl.sys.Stop()
		oc.Pool(func() { target.Send(s.performOnMain, s.quit, objc.ID(0), false) })
	}()
	// The run loop drains pools of its own around every event; this one
	// holds only what run itself may autorelease before it starts.
	oc.Pool(func() { app.Send(s.run) })
	return nil
}

// setUp makes the status item and its menu showing m, and returns the
// shared NSApplication (main thread, inside a pool).
func (v *darwinTray) setUp(m Menu) (objc.ID, error) {
	s, c := &v.oc.sel, &v.oc.cls
	app := c.NSApplication.Send(s.sharedApplication)
	app.Send(s.setActivationPolicy, nsApplicationActivationPolicyAccessory)
	bar := c.NSStatusBar.Send(s.systemStatusBar)
	v.item = bar.Send(s.statusItemWithLength, float64(nsVariableStatusItemLength))
	v.item.Send(s.retain)
	img, err := v.menuBarImage()
	if err != nil {
		return 0, err
	}
	v.item.Send(s.button).Send(s.setImage, img)
	v.menu = c.NSMenu.Send(s.alloc).Send(s.initWithTitle, v.oc.NSString("StartLux"))
	v.menu.Send(s.setAutoenablesItems, false)
	v.item.Send(s.setMenu, v.menu)
	v.show(m)
	return app, nil
}

// menuBarImage returns the template image for the status item: the
// bundle's MenuBarTemplate (@1x and @2x) when there is one, else drawn now.
func (v *darwinTray) menuBarImage() (objc.ID, error) {
	s, c := &v.oc.sel, &v.oc.cls
	img := c.NSImage.Send(s.imageNamed, v.oc.NSString("MenuBarTemplate"))
	if img == 0 {
		png, err := icon.PNG(icon.Template(36))
		if err != nil {
			return 0, err
		}
		data := c.NSData.Send(s.dataWithBytesLength, unsafe.Pointer(&png[0]), uint(len(png)))
		runtime.KeepAlive(png)
		img = c.NSImage.Send(s.alloc).Send(s.initWithData, data)
		if img == 0 {
			return 0, fmt.Errorf("NSImage could not read the menu-bar image")
		}
		img.Send(s.setSize, nsSize{18, 18})
	}
	img.Send(s.setTemplate, true)
	return img, nil
}

// targetClass is registered once per process.
var targetClass = sync.OnceValues(func() (objc.Class, error) {
	oc, err := loadObjC()
	if err != nil {
		return 0, err
	}
	s := &oc.sel
	return objc.RegisterClass("StartLuxMenuTarget", objc.GetClass("NSObject"), nil, nil, []objc.MethodDef{
		{Cmd: s.itemClicked, Fn: func(self objc.ID, _ objc.SEL, sender objc.ID) {
			// The menu is rebuilt on the main thread, where clicks arrive
			// too, so a tag is always a position in the current menu.
			var tag int
			oc.Pool(func() { tag = oc.SendInt(sender, s.tag) })
			trayOf(self).click(0, tag)
		}},
		{Cmd: s.refresh, Fn: func(self objc.ID, _ objc.SEL, _ objc.ID) {
			trayOf(self).refresh()
		}},
		{Cmd: s.quit, Fn: func(self objc.ID, _ objc.SEL, _ objc.ID) {
			oc.Pool(func() { oc.cls.NSApplication.Send(s.sharedApplication).Send(s.terminate, objc.ID(0)) })
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
	var t objc.ID
	v.oc.Pool(func() { t = objc.ID(cls).Send(v.oc.sel.alloc).Send(v.oc.sel.init) })
	trays.Store(t, v)
	return t, nil
}

// darwinTray renders menus into an NSMenu; everything but pending is
// touched on the main thread only.
type darwinTray struct {
	clicks
	oc                 *appObjC
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
		v.oc.Pool(func() { v.show(*m) })
	}
}

// show rebuilds the NSMenu from m (main thread).
func (v *darwinTray) show(m Menu) {
	s, c, oc := &v.oc.sel, &v.oc.cls, v.oc
	v.item.Send(s.button).Send(s.setToolTip, oc.NSString(m.Tooltip))
	flat := flatten(m.Items)
	v.set(flat)
	v.menu.Send(s.removeAllItems)
	menus := map[int]objc.ID{-1: v.menu}
	for i, f := range flat {
		parent := menus[f.parent]
		if f.Separator {
			parent.Send(s.addItem, c.NSMenuItem.Send(s.separatorItem))
			continue
		}
		key := ""
		if f.Action == ActionQuit {
			key = "q"
		}
		it := c.NSMenuItem.Send(s.alloc).Send(s.initWithTitleActionKey,
			oc.NSString(f.Title), s.itemClicked, oc.NSString(key))
		it.Send(s.setTarget, v.target)
		it.Send(s.setTag, i)
		it.Send(s.setEnabled, f.Enabled || len(f.Children) > 0)
		if f.Checkable {
			state := nsControlStateValueOff
			if f.Checked {
				state = nsControlStateValueOn
			}
			it.Send(s.setState, state)
		}
		if len(f.Children) > 0 {
			sub := c.NSMenu.Send(s.alloc).Send(s.initWithTitle, oc.NSString(f.Title))
			sub.Send(s.setAutoenablesItems, false)
			it.Send(s.setSubmenu, sub)
			sub.Send(s.release)
			menus[i] = sub
		}
		parent.Send(s.addItem, it)
		it.Send(s.release)
	}
}
