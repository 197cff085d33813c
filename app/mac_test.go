//go:build mactest && darwin

package app

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ebitengine/purego/objc"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/objcrt"
)

// The app's tests that need a Mac (./build.sh mac-test): the tray's menu
// built in a real NSMenu and read back, a click through AppKit, and the
// SMAppService statuses read by the built app. AppKit runs on the main
// thread only, so TestMain keeps it and runs what the tests hand it.

func init() { runtime.LockOSThread() }

var mainCalls = make(chan func())

func TestMain(m *testing.M) {
	done := make(chan int)
	go func() { done <- m.Run() }()
	for {
		select {
		case f := <-mainCalls:
			f()
		case code := <-done:
			os.Exit(code)
		}
	}
}

// onMain runs f on the main thread, inside a pool.
func onMain(oc *appObjC, f func()) {
	d := make(chan struct{})
	mainCalls <- func() {
		defer close(d)
		oc.Pool(f)
	}
	<-d
}

// menuReader reads an NSMenu back (NSMenu.h, NSMenuItem.h).
type menuReader struct {
	oc                                                                *appObjC
	numberOfItems, itemAtIndex, title, isEnabled, state, submenu, sep objc.SEL
	sendInt                                                           func(objc.ID, objc.SEL) int
	itemAt                                                            func(objc.ID, objc.SEL, int) objc.ID
}

func newMenuReader(oc *appObjC) *menuReader {
	r := &menuReader{oc: oc,
		numberOfItems: objc.RegisterName("numberOfItems"), itemAtIndex: objc.RegisterName("itemAtIndex:"),
		title: objc.RegisterName("title"), isEnabled: objc.RegisterName("isEnabled"), state: objc.RegisterName("state"),
		submenu: objc.RegisterName("submenu"), sep: objc.RegisterName("isSeparatorItem")}
	objcrt.Register(oc.Runtime, &r.sendInt)
	objcrt.Register(oc.Runtime, &r.itemAt)
	return r
}

// lines renders a native menu like the flat list the view built it from:
// one line per item, depth-first, with its parent's position.
func (r *menuReader) lines(menu objc.ID, parent int, out *[]string) {
	n := r.sendInt(menu, r.numberOfItems)
	for i := range n {
		it := r.itemAt(menu, r.itemAtIndex, i)
		if r.oc.SendBool(it, r.sep) {
			*out = append(*out, itemLine(parent, "---", false, false, false))
			continue
		}
		sub := it.Send(r.submenu)
		*out = append(*out, itemLine(parent, r.oc.GoString(it.Send(r.title)), r.oc.SendBool(it, r.isEnabled), r.sendInt(it, r.state) == nsControlStateValueOn, sub != 0))
		if sub != 0 {
			r.lines(sub, len(*out)-1, out)
		}
	}
}

func itemLine(parent int, title string, enabled, checked, sub bool) string {
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", parent+1))
	b.WriteString(title)
	if enabled {
		b.WriteString(" [enabled]")
	}
	if checked {
		b.WriteString(" [checked]")
	}
	if sub {
		b.WriteString(" ▸")
	}
	return b.String()
}

// wantLines is lines for the flat list a view builds native items from.
func wantLines(m Menu) []string {
	var out []string
	for _, f := range flatten(m.Items) {
		if f.Separator {
			out = append(out, itemLine(f.parent, "---", false, false, false))
			continue
		}
		out = append(out, itemLine(f.parent, f.Title, f.Enabled || len(f.Children) > 0, f.Checkable && f.Checked, len(f.Children) > 0))
	}
	return out
}

// TestMacTrayMenu shows the controller's menu in a real NSStatusItem's
// NSMenu, reads every item back (title, enabled, check mark, submenus) and
// clicks Start at Login through AppKit.
func TestMacTrayMenu(t *testing.T) {
	oc, err := loadObjC()
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{
		status: api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Backend: "metal", Calibrated: true}, RequestsServed: 3},
		models: []api.ModelEntry{{Name: "demo", Current: true, Calibrated: true}, {Name: "other", Calibrated: true}},
	}
	sys := &fakeSystem{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctrl := New(d, sys, Options{})
	m := ctrl.Poll(ctx)
	v := &darwinTray{clicks: clicks{ctx: ctx, ctrl: ctrl}, oc: oc}
	target, err := newTarget(v)
	if err != nil {
		t.Fatal(err)
	}
	v.target = target
	var got []string
	onMain(oc, func() {
		if _, err = v.setUp(m); err != nil {
			return
		}
		newMenuReader(oc).lines(v.menu, -1, &got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := wantLines(m); !slices.Equal(got, want) {
		t.Fatalf("the NSMenu reads back\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	login := slices.IndexFunc(m.Items, func(it Item) bool { return it.Action == ActionLogin }) // its index in the top-level NSMenu
	perform := objc.RegisterName("performActionForItemAtIndex:")
	onMain(oc, func() { v.menu.Send(perform, login) })
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(sys.Calls(), "login") {
		if time.Now().After(deadline) {
			t.Fatalf("clicking Start at Login did not reach the system: calls %v", sys.Calls())
		}
		time.Sleep(20 * time.Millisecond)
	}
	onMain(oc, func() {
		oc.cls.NSStatusBar.Send(oc.sel.systemStatusBar).Send(objc.RegisterName("removeStatusItem:"), v.item)
	})
}

// TestMacLoginStatus runs the built app's --login-status (only the app can
// ask SMAppService about itself) and checks what it reports.
func TestMacLoginStatus(t *testing.T) {
	bundle := os.Getenv("STARTLUX_MAC_APP")
	if bundle == "" {
		t.Fatal("STARTLUX_MAC_APP must name a built StartLux.app (./build.sh mac-test sets it)")
	}
	out, err := exec.Command(filepath.Join(bundle, "Contents", "MacOS", "StartLux"), "--login-status").Output()
	if err != nil {
		t.Fatalf("--login-status: %v", err)
	}
	var items []LoginItemState
	if err := json.Unmarshal(out, &items); err != nil {
		t.Fatalf("--login-status printed %s: %v", out, err)
	}
	t.Logf("login items: %s", out)
	known := []string{"not registered", "enabled", "requires approval", "not found"}
	if len(items) != 2 || items[0].Kind != "SMAppService.mainApp" || items[1].Kind != "SMAppService agent" {
		t.Fatalf("items %+v", items)
	}
	for _, it := range items {
		if !slices.Contains(known, it.State) {
			t.Errorf("%s: state %q is not an SMAppServiceStatus", it.Name, it.State)
		}
	}
	if _, err := os.Stat(items[1].Path); err != nil {
		t.Errorf("the agent plist: %v", err)
	}
}
