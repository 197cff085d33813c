package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/testenv"
)

// sessionBus starts a private D-Bus session daemon for the test and points
// DBUS_SESSION_BUS_ADDRESS at it. It skips the test when dbus-daemon is not
// installed (Debian: apt-get install dbus).
func sessionBus(t *testing.T) string {
	t.Helper()
	bin := testenv.LookPath(t, "dbus-daemon", "Debian's dbus package, to test the Linux tray: apt-get install dbus; ./build.sh test does")
	cmd := exec.Command(bin, "--session", "--nofork", "--nopidfile", "--print-address=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone even if the test panics
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case addr := <-line:
		if addr == "" {
			t.Fatal("dbus-daemon printed no address")
		}
		t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
		return addr
	case <-time.After(10 * time.Second):
		t.Fatal("dbus-daemon printed no address within 10 s")
	}
	return ""
}

// watcher is a minimal org.kde.StatusNotifierWatcher: it records who
// registers which item.
type watcher struct {
	registered chan [2]string // sender, service
}

func (w *watcher) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	w.registered <- [2]string{string(sender), service}
	return nil
}

// dbusItem is one com.canonical.dbusmenu layout node.
type dbusItem struct {
	ID       int32
	Props    map[string]dbus.Variant
	Children []dbusItem
}

func toItem(v any) (dbusItem, error) {
	f, ok := v.([]any)
	if !ok || len(f) != 3 {
		return dbusItem{}, fmt.Errorf("layout node %T %v is not (ia{sv}av)", v, v)
	}
	it := dbusItem{}
	it.ID, _ = f[0].(int32)
	it.Props, _ = f[1].(map[string]dbus.Variant)
	kids, _ := f[2].([]dbus.Variant)
	for _, k := range kids {
		c, err := toItem(k.Value())
		if err != nil {
			return it, err
		}
		it.Children = append(it.Children, c)
	}
	return it, nil
}

// getLayout reads the whole menu of the item at dest over D-Bus.
func getLayout(conn *dbus.Conn, dest string) (dbusItem, error) {
	obj := conn.Object(dest, "/StatusNotifierItem/menu")
	var rev uint32
	var root struct {
		ID       int32
		Props    map[string]dbus.Variant
		Children []dbus.Variant
	}
	if err := obj.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{}).Store(&rev, &root); err != nil {
		return dbusItem{}, fmt.Errorf("GetLayout: %w", err)
	}
	out := dbusItem{ID: root.ID, Props: root.Props}
	for _, k := range root.Children {
		c, err := toItem(k.Value())
		if err != nil {
			return out, err
		}
		out.Children = append(out.Children, c)
	}
	return out, nil
}

// text renders a D-Bus menu the way Menu.Text renders the model, so the two
// can be compared.
func (it dbusItem) text() string {
	var b strings.Builder
	var walk func([]dbusItem, string)
	prop := func(c dbusItem, k string) any {
		if v, ok := c.Props[k]; ok {
			return v.Value()
		}
		return nil
	}
	walk = func(items []dbusItem, indent string) {
		for _, c := range items {
			if prop(c, "visible") == false {
				continue
			}
			if prop(c, "type") == "separator" {
				b.WriteString(indent + "---\n")
				continue
			}
			label, _ := prop(c, "label").(string)
			sub := prop(c, "children-display") == "submenu"
			switch {
			case prop(c, "toggle-type") == "checkmark" && fmt.Sprint(prop(c, "toggle-state")) == "1":
				b.WriteString(indent + "✓ ")
			case prop(c, "toggle-type") == "checkmark":
				b.WriteString(indent + "  ")
			default:
				b.WriteString(indent)
			}
			if prop(c, "enabled") == false {
				label = "[" + label + "]"
			}
			b.WriteString(label)
			if sub {
				b.WriteString(" ▸")
			}
			b.WriteString("\n")
			walk(c.Children, indent+"    ")
		}
	}
	walk(it.Children, "")
	return b.String()
}

// find returns the id of the first item labelled label.
func (it dbusItem) find(label string) (int32, bool) {
	for _, c := range it.Children {
		if l, _ := c.Props["label"].Value().(string); l == label {
			return c.ID, true
		}
		if id, ok := c.find(label); ok {
			return id, true
		}
	}
	return 0, false
}

// TestLinuxTrayOverDBus runs the real tray (fyne.io/systray) on a private
// session bus: it must register with a StatusNotifierWatcher, publish the
// controller's menu over com.canonical.dbusmenu exactly as the model says,
// and turn clicks sent over D-Bus into actions.
func TestLinuxTrayOverDBus(t *testing.T) {
	addr := sessionBus(t)
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w := &watcher{registered: make(chan [2]string, 4)}
	if err := conn.Export(w, "/StatusNotifierWatcher", "org.kde.StatusNotifierWatcher"); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName("org.kde.StatusNotifierWatcher", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own the watcher name: %v %v", reply, err)
	}

	d := &fakeDaemon{
		status: api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Backend: "cpu", Calibrated: true}, SnapshotLimit: 64 << 20},
		models: []api.ModelEntry{{Name: "demo", Current: true, Calibrated: true}, {Name: "other", Calibrated: true}},
	}
	var loadMu sync.Mutex
	d.loadFn = func(name string) error {
		loadMu.Lock()
		defer loadMu.Unlock()
		d.mu.Lock()
		defer d.mu.Unlock()
		for i := range d.models {
			d.models[i].Current = d.models[i].Name == name
		}
		d.status.Model.Name = name
		return nil
	}
	sys := &fakeSystem{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctrl := New(d, sys, Options{Interval: 20 * time.Millisecond, ModelsDir: "/models", OnQuit: cancel})
	ctrl.Poll(ctx)
	go ctrl.Run(ctx)
	if trayRan.Load() {
		t.Skip("the tray already ran in this test process (go test -count > 1); fyne.io/systray runs once per process")
	}
	done := make(chan error, 1)
	go func() { done <- RunTray(ctx, ctrl) }()

	var sender string
	select {
	case r := <-w.registered:
		sender = r[0]
		if r[1] != "/StatusNotifierItem" {
			t.Errorf("registered service %q, want the object path /StatusNotifierItem", r[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tray did not register with the StatusNotifierWatcher within 10 s")
	}

	// The menu over D-Bus must read exactly as the model.
	waitMenu := func(what string, cond func(string) bool) dbusItem {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			root, err := getLayout(conn, sender)
			if err != nil {
				t.Fatal(err)
			}
			got := root.text()
			if got == ctrl.Menu().Text() && cond(got) {
				return root
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: D-Bus menu:\n%s\nmodel:\n%s", what, got, ctrl.Menu().Text())
			}
			time.Sleep(30 * time.Millisecond)
		}
	}
	root := waitMenu("first menu", func(s string) bool { return strings.Contains(s, "✓ demo") })

	screenshotOpenMenu(t, conn, sender)

	var tip any
	if err := conn.Object(sender, "/StatusNotifierItem").Call("org.freedesktop.DBus.Properties.Get", 0, "org.kde.StatusNotifierItem", "ToolTip").Store(&tip); err != nil {
		t.Errorf("read the item's ToolTip: %v", err)
	} else if !strings.Contains(fmt.Sprint(tip), "StartLux: demo") {
		t.Errorf("ToolTip %v lacks the model", tip)
	}

	// click sends a click; with flags dbus.FlagNoReplyExpected it does not
	// wait for the reply (Quit may close the tray's connection first).
	click := func(root dbusItem, label string, flags dbus.Flags) {
		t.Helper()
		id, ok := root.find(label)
		if !ok {
			t.Fatalf("no %q in the D-Bus menu:\n%s", label, root.text())
		}
		call := conn.Object(sender, "/StatusNotifierItem/menu").Call("com.canonical.dbusmenu.Event", flags, id, "clicked", dbus.MakeVariant(""), uint32(0))
		if call.Err != nil {
			t.Fatalf("click %q: %v", label, call.Err)
		}
	}

	// Switch model through the menu: the same items update in place.
	click(root, "other", 0)
	root = waitMenu("after switching", func(s string) bool { return strings.Contains(s, "✓ other") && strings.Contains(s, "Model: other") })
	d.mu.Lock()
	loads := slices.Clone(d.loads)
	d.mu.Unlock()
	if !slices.Equal(loads, []string{"other"}) {
		t.Errorf("loads %v, want [other]", loads)
	}

	click(root, "Open Models Folder…", 0)
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(sys.Calls(), "open /models") {
		if time.Now().After(deadline) {
			t.Fatalf("Open Models Folder did not reach the system: %q", sys.Calls())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A new model changes the menu's shape: the tray rebuilds it.
	d.mu.Lock()
	d.models = append(d.models, api.ModelEntry{Name: "third", Calibrated: true})
	d.mu.Unlock()
	root = waitMenu("after a model appeared", func(s string) bool { return strings.Contains(s, "  third") })

	// The daemon goes away: the menu says so and offers to start it.
	d.mu.Lock()
	d.err = fmt.Errorf("no daemon is listening")
	d.mu.Unlock()
	root = waitMenu("daemon down", func(s string) bool { return strings.Contains(s, "Start Daemon") })
	click(root, "Start Daemon", 0)
	root = waitMenu("starting", func(s string) bool { return strings.Contains(s, "Daemon starting…") })

	click(root, "Quit StartLux", dbus.FlagNoReplyExpected)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Quit did not end the tray")
	}
	if err := RunTray(context.Background(), ctrl); !errors.Is(err, ErrTrayRan) {
		t.Errorf("a second RunTray in one process: %v, want ErrTrayRan", err)
	}
	// Exactly the clicked actions reached the system: rebuilding the menu
	// must not fire the removed items (systray closes their channels).
	if calls, want := sys.Calls(), []string{"open /models", "start", "stop"}; !slices.Equal(calls, want) {
		t.Errorf("system calls %q, want %q", calls, want)
	}
}
