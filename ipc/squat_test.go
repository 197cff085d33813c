package ipc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/testenv"
)

// squatEnv names the socket a re-executed test binary squats on (see
// TestMain): it makes the socket's directory world-writable, listens, and
// answers every request with a forged status, printing "ready" once it
// listens and one line per connection and per request it receives.
const squatEnv = "STARTLUX_TEST_SQUAT"

func TestMain(m *testing.M) {
	if path := os.Getenv(squatEnv); path != "" {
		if err := squat(path); err != nil {
			fmt.Println("squat:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// squat is the squatting server: what another local user could run.
func squat(path string) error {
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil {
		return err
	}
	var mu sync.Mutex // guards stdout
	say := func(s string) { mu.Lock(); fmt.Println(s); mu.Unlock() }
	go func() { // the test closes stdin to stop us
		io.Copy(io.Discard, os.Stdin)
		ul.Close()
	}()
	say("ready")
	for {
		c, err := ul.Accept()
		if err != nil {
			return nil
		}
		say("connection")
		go func() {
			defer c.Close()
			for {
				body, err := ReadFrame(c, DefaultFrameLimit)
				if err != nil {
					return
				}
				req, _, perr := parseRequest(body)
				if perr != nil {
					return
				}
				say("request " + req.Method)
				forged, _ := Marshal(api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "forged"}})
				WriteFrame(c, appendResponse(nil, req.ID, true, forged, nil))
			}
		}()
	}
}

// squatter is a squatting server run as another user.
type squatter struct {
	mu    sync.Mutex // guards lines
	lines []string
}

func (s *squatter) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// otherUser returns the uid and gid of a local account that is not ours,
// creating it (startlux-squatter, with useradd) when missing. It needs root.
func otherUser(t *testing.T) (uid, gid int) {
	t.Helper()
	testenv.Root(t, "running a server as another user")
	const name = "startlux-squatter"
	u, err := user.Lookup(name)
	if err != nil {
		useradd := testenv.LookPath(t, "useradd", "Debian's passwd package")
		out, err := exec.Command(useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if u, err = user.Lookup(name); err != nil { // another test run may have made it meanwhile
			t.Fatalf("useradd %s: %s: %v", name, out, err)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if uid == os.Getuid() {
		t.Fatalf("user %s has our own uid %d", name, uid)
	}
	return uid, gid
}

// startSquatter runs the test binary as uid:gid squatting on path and waits
// until it listens. A directory the other user can reach holds a copy of the
// binary (the build directory is private to us).
func startSquatter(t *testing.T, path string, uid, gid int) *squatter {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("", "startlux-squat-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(binDir, "ipc.test")
	if err := os.WriteFile(copyPath, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyPath)
	cmd.Env = append(os.Environ(), squatEnv+"="+path)
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	dieWithParent(cmd.SysProcAttr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &squatter{}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first {
				ready <- sc.Text()
				first = false
				continue
			}
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
		if first {
			ready <- "exited"
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	select {
	case line := <-ready:
		if line != "ready" {
			t.Fatalf("the squatting server did not start: %s", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the squatting server did not start within 30 s")
	}
	return s
}

// sharedTmp makes a directory like /tmp (world-writable, sticky) for the
// squatter to make its directory in.
func sharedTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "startlux-shared-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return d
}

// privateDir returns a fresh directory that passes CheckSocketDir
// (t.TempDir makes them 0755).
func privateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestClientRefusesSquatter has another user take the socket's place before
// the daemon, as in /tmp/startlux-<uid>: it makes the directory
// (world-writable) and listens there. The client must refuse to talk to it,
// naming what it found, and send it nothing. Then the squatter's socket is
// moved into a directory of ours, so that only the server's credentials give
// it away.
func TestClientRefusesSquatter(t *testing.T) {
	uid, gid := otherUser(t)
	tmp := sharedTmp(t)
	path := filepath.Join(tmp, "startlux-"+strconv.Itoa(os.Getuid()), SocketName)
	sq := startSquatter(t, path, uid, gid)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, path)
	wantDir := fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, os.Getuid())
	if !errors.Is(err, ErrUnsafeSocket) || !strings.Contains(err.Error(), wantDir) {
		t.Fatalf("Dial through the squatter's directory: %v, want ErrUnsafeSocket saying %q", err, wantDir)
	}
	// The daemon refuses that directory by the same rule.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), wantDir) {
		t.Errorf("Listen in the squatter's directory: %v, want a refusal saying %q", err, wantDir)
	}

	// The squatter's socket in a directory that passes the check: the
	// server's credentials must be read and refused.
	ours := privateDir(t)
	moved := filepath.Join(ours, SocketName)
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	_, err = Dial(ctx, moved)
	wantPeer := fmt.Sprintf("the process serving it runs as uid %d, not as you (uid %d) or root", uid, os.Getuid())
	if !errors.Is(err, ErrUnsafeSocket) || !strings.Contains(err.Error(), wantPeer) {
		t.Fatalf("Dial to the squatter: %v, want ErrUnsafeSocket saying %q", err, wantPeer)
	}
	// It connected once (that is how its credentials were read), and was
	// sent nothing.
	deadline := time.Now().Add(5 * time.Second)
	for len(sq.seen()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := sq.seen(); len(got) != 1 || got[0] != "connection" {
		t.Errorf("the squatter saw %q, want one connection and no request", got)
	}
	// A client that skips Dial's checks is answered by the forger: what
	// the checks prevent.
	c, err := net.Dial("unix", moved)
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(c, DefaultFrameLimit)
	defer cl.Close()
	var st api.Status
	if err := cl.Call(ctx, api.MethodStatus, nil, &st); err != nil || st.Model.Name != "forged" {
		t.Fatalf("unchecked client: %+v, %v; want the forged status", st, err)
	}
}
