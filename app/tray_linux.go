package app

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"fyne.io/systray"

	"github.com/startlux/startlux/app/icon"
)

// trayRan records that RunTray has run in this process. It mirrors the
// package-level state of fyne.io/systray, whose quit and D-Bus connection
// are once per process: a second tray would start on a closed connection and
// panic inside the library.
var trayRan atomic.Bool

// ErrTrayRan is returned by a second RunTray in one process.
var ErrTrayRan = errors.New("tray: fyne.io/systray runs one tray per process, and it has already run")

// RunTray shows the controller's menu as a StatusNotifierItem with a
// com.canonical.dbusmenu menu (fyne.io/systray) and blocks until ctx ends or
// the quit action runs. Call it from the main goroutine, once per process
// (a second call returns ErrTrayRan).
func RunTray(ctx context.Context, ctrl *Controller) error {
	if trayRan.Swap(true) {
		return ErrTrayRan
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &linuxTray{clicks: clicks{ctx: ctx, ctrl: ctrl}}
	png, err := icon.PNG(icon.App(64))
	if err != nil {
		return err
	}
	onReady := func() {
		systray.SetIcon(png)
		systray.SetTitle("StartLux")
		ctrl.OnChange(v.render) // renders the current menu at once
	}
	go func() {
		<-ctx.Done()
		systray.Quit()
	}()
	systray.Run(onReady, func() {})
	return nil
}

// linuxTray mirrors the menu onto fyne.io/systray items.
type linuxTray struct {
	clicks

	mu    sync.Mutex // serialises renders
	shape string
	items []*systray.MenuItem // by flat position; nil for separators
	stop  context.CancelFunc  // ends the click listeners of the current items
}

func (v *linuxTray) render(m Menu) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ctx.Err() != nil {
		return // the tray has quit
	}
	systray.SetTooltip(m.Tooltip)
	flat := flatten(m.Items)
	v.set(flat)
	if shape := shapeOf(flat); shape != v.shape || v.items == nil {
		v.rebuild(flat)
		v.shape = shape
		return
	}
	for i, f := range flat {
		if it := v.items[i]; it != nil {
			apply(it, f.Item)
		}
	}
}

// rebuild replaces every native item.
func (v *linuxTray) rebuild(flat []flatItem) {
	if v.stop != nil {
		v.stop()
	}
	systray.ResetMenu()
	ctx, stop := context.WithCancel(v.ctx)
	v.stop = stop
	gen := v.rebuilt()
	v.items = make([]*systray.MenuItem, len(flat))
	for i, f := range flat {
		var parent *systray.MenuItem
		if f.parent >= 0 {
			parent = v.items[f.parent]
		}
		var it *systray.MenuItem
		switch {
		case f.Separator && parent == nil:
			systray.AddSeparator()
		case f.Separator:
			parent.AddSeparator()
		case parent == nil && f.Checkable:
			it = systray.AddMenuItemCheckbox(f.Title, "", f.Checked)
		case parent == nil:
			it = systray.AddMenuItem(f.Title, "")
		case f.Checkable:
			it = parent.AddSubMenuItemCheckbox(f.Title, "", f.Checked)
		default:
			it = parent.AddSubMenuItem(f.Title, "")
		}
		if it == nil {
			continue
		}
		apply(it, f.Item)
		v.items[i] = it
		go func(i int, ch chan struct{}) {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-ch:
					if !ok {
						return // the item was removed: systray closes its channel
					}
					v.click(gen, i)
				}
			}
		}(i, it.ClickedCh)
	}
}

// apply sets an item's title, state and check mark.
func apply(it *systray.MenuItem, m Item) {
	it.SetTitle(m.Title)
	if m.Enabled || len(m.Children) > 0 {
		it.Enable()
	} else {
		it.Disable()
	}
	if m.Checkable {
		if m.Checked {
			it.Check()
		} else {
			it.Uncheck()
		}
	}
}
