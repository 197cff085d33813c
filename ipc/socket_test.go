package ipc

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultSocketPath(t *testing.T) {
	long := "/" + strings.Repeat("d", 100)
	cases := []struct {
		goos, home, xdg string
		want            string
	}{
		{"darwin", "/Users/ann", "", "/Users/ann/Library/Application Support/StartLux/startlux.sock"},
		{"darwin", long, "", "/tmp/startlux-501/startlux.sock"},
		{"darwin", "", "", "/tmp/startlux-501/startlux.sock"},
		{"linux", "/home/ann", "/run/user/501", "/run/user/501/startlux/startlux.sock"},
		{"linux", "/home/ann", "", "/tmp/startlux-501/startlux.sock"},
		{"linux", "/home/ann", "relative/dir", "/tmp/startlux-501/startlux.sock"},
		{"linux", "/home/ann", long, "/tmp/startlux-501/startlux.sock"},
	}
	for _, c := range cases {
		if got := defaultSocketPath(c.goos, c.home, c.xdg, 501); got != c.want {
			t.Errorf("defaultSocketPath(%s, %.20s, %.20s) = %s, want %s", c.goos, c.home, c.xdg, got, c.want)
		}
	}
}

func TestPrepareDirStrict(t *testing.T) {
	uid := os.Getuid()
	base := t.TempDir()
	mk := func(name string, setup func(p string)) string {
		p := filepath.Join(base, name)
		setup(p)
		return p
	}
	cases := []struct {
		name string
		dir  string
		want string // substring of the error; "" = accepted
	}{
		{"created fresh", filepath.Join(base, "fresh"), ""},
		{"good existing", mk("good", func(p string) { os.Mkdir(p, 0o700) }), ""},
		{"loose mode", mk("loose", func(p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o755) }), "has mode 0755"},
		{"symlink", mk("link", func(p string) { os.Mkdir(p+"-target", 0o700); os.Symlink(p+"-target", p) }), "symbolic link"},
		{"a file", mk("file", func(p string) { os.WriteFile(p, nil, 0o600) }), "not a directory"},
	}
	if uid == 0 {
		cases = append(cases, struct{ name, dir, want string }{"someone else's",
			mk("other", func(p string) { os.Mkdir(p, 0o700); os.Chown(p, 12345, 12345) }), "owned by uid 12345"})
	}
	for _, c := range cases {
		err := prepareDir(c.dir, uid, dirStrict)
		if c.want == "" && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "refusing")) {
			t.Errorf("%s: error %v, want one saying %q and refusing", c.name, err, c.want)
		}
	}
	// Our own default directory is tightened, not refused.
	own := mk("own", func(p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o755) })
	if err := prepareDir(own, uid, dirOwn); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(own); fi.Mode().Perm() != 0o700 {
		t.Errorf("own dir mode %v after prepare, want 0700", fi.Mode().Perm())
	}
}

// TestSocketDirRule checks the one rule both sides apply to a socket's
// directory: a client refuses to connect through a directory that breaks it
// (Dial, so the CLI and the app), and the daemon refuses to listen in one
// (Listen, also for a --socket path of the user's choosing), each saying
// what it found.
func TestSocketDirRule(t *testing.T) {
	uid := os.Getuid()
	base := privateDir(t)
	mk := func(name string, setup func(p string)) string {
		p := filepath.Join(base, name)
		setup(p)
		return p
	}
	cases := []struct {
		name string
		dir  string
		want string // what the error says; "" = accepted
	}{
		{"private", mk("good", func(p string) { os.Mkdir(p, 0o700) }), ""},
		{"world-writable", mk("open", func(p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o777) }), "has mode 0777, want 0700"},
		{"sticky world-writable", mk("sticky", func(p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o777|os.ModeSticky) }), "has mode 0777, want 0700"},
		{"readable by others", mk("loose", func(p string) { os.Mkdir(p, 0o700); os.Chmod(p, 0o755) }), "has mode 0755, want 0700"},
		{"symlink to a private dir", mk("link", func(p string) { os.Mkdir(p+"-target", 0o700); os.Symlink(p+"-target", p) }), "is a symbolic link"},
	}
	if uid == 0 {
		cases = append(cases, struct{ name, dir, want string }{"someone else's",
			mk("other", func(p string) { os.Mkdir(p, 0o700); os.Chown(p, 12345, 12345) }), "is owned by uid 12345, not by you (uid 0)"})
	}
	for _, c := range cases {
		path := filepath.Join(c.dir, "d.sock")
		// A live server on each, bound before the directory is checked:
		// Dial must refuse before connecting.
		if c.want != "" {
			ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			defer ul.Close()
		}
		err := CheckSocketDir(path)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: CheckSocketDir: %v", c.name, err)
			}
			l, err := Listen(path)
			if err != nil {
				t.Errorf("%s: Listen: %v", c.name, err)
				continue
			}
			cl, err := Dial(context.Background(), path)
			if err != nil {
				t.Errorf("%s: Dial: %v", c.name, err)
			} else {
				cl.Close()
			}
			l.Close()
			continue
		}
		if !errors.Is(err, ErrUnsafeSocket) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.dir) {
			t.Errorf("%s: CheckSocketDir: %v, want ErrUnsafeSocket naming %s and saying %q", c.name, err, c.dir, c.want)
		}
		if _, err := Dial(context.Background(), path); !errors.Is(err, ErrUnsafeSocket) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Dial: %v, want ErrUnsafeSocket saying %q", c.name, err, c.want)
		}
		if _, err := Listen(filepath.Join(c.dir, "other.sock")); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s: Listen: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
	// A missing directory: nobody listens there, and the client says so.
	if _, err := Dial(context.Background(), filepath.Join(base, "none", "d.sock")); err == nil || !strings.Contains(err.Error(), "no daemon is listening") {
		t.Errorf("Dial through a missing directory: %v", err)
	}
}

func TestListen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	path := filepath.Join(dir, "d.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v mode %v, want a 0600 socket", err, fi.Mode())
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("created dir mode %v, want 0700", di.Mode().Perm())
	}

	// A second daemon on the live socket is refused, clearly.
	if _, err := Listen(path); !errors.Is(err, ErrDaemonRunning) {
		t.Fatalf("second Listen: %v, want ErrDaemonRunning", err)
	}
	// Closing removes the socket.
	l.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket still there after Close: %v", err)
	}
}

func TestListenStaleAndLive(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "d.sock")

	// A stale socket (its listener gone, the file left) is replaced.
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal("stale socket not left behind")
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l.Close()

	// A live socket whose owner holds no lock is still detected by dialing.
	live, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := Listen(path); !errors.Is(err, ErrDaemonRunning) {
		t.Fatalf("Listen on a live socket: %v, want ErrDaemonRunning", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the live socket was removed: %v", err)
	}

	// A regular file in the way is not removed.
	file := filepath.Join(dir, "file.sock")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Fatal("the regular file was touched")
	}

	// Too long a path is refused with the limit named.
	if _, err := Listen(filepath.Join(dir, strings.Repeat("x", 120))); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("long path: %v", err)
	}
}
