package app

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/startlux/startlux/internal/testenv"
)

// screenshotTools are the programs the menu screenshot needs, with the
// Debian packages that bring them.
var screenshotTools = map[string]string{
	"Xvfb":        "xvfb",
	"xfce4-panel": "xfce4-panel",
	"xdotool":     "xdotool",
	"import":      "imagemagick",
}

// artifactDir is where test artifacts go: $STARTLUX_ARTIFACTS, else
// dist/artifacts in the module.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("STARTLUX_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "dist", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// startXvfb runs a virtual X server on a free display and returns it.
func startXvfb(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "800x600x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case n := <-line:
		if n == "" {
			t.Fatal("Xvfb printed no display number")
		}
		return ":" + n
	case <-time.After(20 * time.Second):
		t.Fatal("Xvfb did not start within 20 s")
	}
	return ""
}

// shoot takes a screenshot of the whole X display.
func shoot(t *testing.T, display string) (image.Image, []byte) {
	t.Helper()
	cmd := exec.Command("import", "-display", display, "-window", "root", "png:-")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("screenshot: %v: %s", err, errb.String())
	}
	img, err := png.Decode(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img, out.Bytes()
}

// findIcon returns the centre of the app icon's orange pixels in the top 60
// rows of the screen.
func findIcon(img image.Image) (image.Point, bool) {
	b := img.Bounds()
	var sx, sy, n int
	for y := b.Min.Y; y < min(b.Max.Y, b.Min.Y+60); y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r > 220 && g > 80 && g < 200 && bl < 90 {
				sx, sy, n = sx+x, sy+y, n+1
			}
		}
	}
	if n < 20 {
		return image.Point{}, false
	}
	return image.Pt(sx/n, sy/n), true
}

// changedBelow counts pixels that differ between two screenshots below row y.
func changedBelow(a, b image.Image, y0 int) int {
	n := 0
	r := a.Bounds()
	for y := y0; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				n++
			}
		}
	}
	return n
}

// screenshotOpenMenu hands the StatusNotifierWatcher name over to a real
// status-notifier host (xfce4-panel's systray plugin) on a virtual X
// display, waits until the tray item (on D-Bus as sender) shows there,
// clicks it and saves a screenshot of the open menu as a test artifact. It
// only logs, and returns, when the tools are not installed.
func screenshotOpenMenu(t *testing.T, conn *dbus.Conn, sender string) {
	t.Helper()
	var missing []string
	for tool, pkg := range screenshotTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("no screenshot of the open menu: install %s (Debian) for a status-notifier host under Xvfb", strings.Join(missing, " "))
		if testenv.InCI() {
			t.Fatalf("%s (CI=true: ./build.sh test installs them)", msg)
		}
		t.Log(msg)
		return
	}
	if _, err := conn.ReleaseName("org.kde.StatusNotifierWatcher"); err != nil {
		t.Fatal(err)
	}
	display := startXvfb(t)
	panel := exec.Command("xfce4-panel", "--disable-wm-check")
	panel.Env = append(os.Environ(), "DISPLAY="+display, "XDG_CONFIG_HOME="+t.TempDir())
	panel.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := panel.Start(); err != nil {
		t.Fatalf("start xfce4-panel: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-panel.Process.Pid, syscall.SIGKILL) // the panel and its plugin wrappers
		panel.Wait()
	})

	// The panel's watcher must list the item (the tray re-registers when
	// the watcher name changes hands).
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := conn.Object("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher").GetProperty("org.kde.StatusNotifierWatcher.RegisteredStatusNotifierItems")
		if err == nil && strings.Contains(fmt.Sprint(v.Value()), sender) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("xfce4-panel's watcher never listed the tray item %s (last: %v, %v)", sender, v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var closed image.Image
	var at image.Point
	for {
		img, _ := shoot(t, display)
		if p, ok := findIcon(img); ok {
			closed, at = img, p
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the StartLux icon never showed in the panel")
		}
		time.Sleep(200 * time.Millisecond)
	}
	xdo := func(args ...string) {
		cmd := exec.Command("xdotool", args...)
		cmd.Env = append(os.Environ(), "DISPLAY="+display)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("xdotool %v: %v: %s", args, err, out)
		}
	}
	xdo("mousemove", fmt.Sprint(at.X), fmt.Sprint(at.Y), "click", "1")
	var data []byte
	for {
		time.Sleep(300 * time.Millisecond)
		var open image.Image
		open, data = shoot(t, display)
		// The menu drops below the panel: a large area changes.
		if changedBelow(closed, open, 40) > 20000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("clicking the icon opened no menu")
		}
	}
	time.Sleep(500 * time.Millisecond) // let the submenu arrow and labels settle
	_, data = shoot(t, display)
	out := filepath.Join(artifactDir(t), "linux-tray-menu.png")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the open tray menu: %s", out)
	xdo("key", "Escape")
}
