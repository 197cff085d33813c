package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the file name of the daemon's socket in its directory.
const SocketName = "startlux.sock"

// maxSocketPath returns the longest socket path the OS takes (sun_path
// less its terminating zero).
func maxSocketPath(goos string) int {
	if goos == "linux" {
		return 107
	}
	return 103
}

// FallbackDir returns the per-user directory used when the usual one is
// unavailable: /tmp/startlux-<uid>.
func FallbackDir(uid int) string {
	return filepath.Join("/tmp", "startlux-"+strconv.Itoa(uid))
}

// defaultSocketPath picks the socket path for an OS, home directory,
// XDG_RUNTIME_DIR value and uid: ~/Library/Application Support/StartLux on
// macOS, $XDG_RUNTIME_DIR/startlux elsewhere, and the /tmp fallback when that
// is unset, relative, or too long for a socket address.
func defaultSocketPath(goos, home, xdgRuntime string, uid int) string {
	var p string
	switch goos {
	case "darwin":
		if home != "" {
			p = filepath.Join(home, "Library", "Application Support", "StartLux", SocketName)
		}
	default:
		if filepath.IsAbs(xdgRuntime) {
			p = filepath.Join(xdgRuntime, "startlux", SocketName)
		}
	}
	if p == "" || len(p) > maxSocketPath(goos) {
		p = filepath.Join(FallbackDir(uid), SocketName)
	}
	return p
}

// DefaultSocketPath returns where the daemon listens unless told otherwise
// (architecture decision 3): on macOS
// ~/Library/Application Support/StartLux/startlux.sock, on Linux
// $XDG_RUNTIME_DIR/startlux/startlux.sock, and /tmp/startlux-<uid>/startlux.sock
// where those are unavailable or too long.
func DefaultSocketPath() string {
	home, _ := os.UserHomeDir()
	return defaultSocketPath(runtime.GOOS, home, os.Getenv("XDG_RUNTIME_DIR"), os.Getuid())
}

// dirPolicy says how a socket directory is prepared.
type dirPolicy int

const (
	// dirStrict: the shared-/tmp fallback, or a directory the user chose;
	// it is created 0700 when missing, and otherwise must already follow
	// the rule of [CheckSocketDir] (someone else could have made it).
	dirStrict dirPolicy = iota
	// dirOwn: our own default directory inside the user's private space;
	// created 0700, its mode fixed to 0700 if loosened.
	dirOwn
)

// policyFor returns how the directory of path is treated.
func policyFor(path string) dirPolicy {
	if path == DefaultSocketPath() && filepath.Dir(path) != FallbackDir(os.Getuid()) {
		return dirOwn
	}
	return dirStrict
}

// prepareDir creates the socket directory if needed and checks it with
// the rule of [CheckSocketDir]; only our own default directory is
// tightened instead of refused.
func prepareDir(dir string, uid int, policy dirPolicy) error {
	mkErr := os.MkdirAll(dir, 0o700)
	fi, err := os.Lstat(dir)
	if err != nil {
		if mkErr != nil {
			err = mkErr
		}
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if reason := dirProblem(fi, uid); reason != "" {
		if policy == dirOwn && fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 && ownerOf(fi) == uid {
			// Our own directory, loosened by someone: tighten it.
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("socket directory %s: %w", dir, err)
			}
			return nil
		}
		return fmt.Errorf("socket directory %s %s; refusing to use it (remove it, or pass --socket with a path in a private directory)", dir, reason)
	}
	return nil
}

// ownerOf returns the uid owning a file, or -1 when unknown.
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// dirProblem returns why fi (from Lstat) is not a safe socket directory for
// uid, or "" when it is: it must be a real directory (not a symbolic link),
// owned by uid, with mode 0700. The daemon applies it to the directory it
// listens in and clients to the directory they connect through.
func dirProblem(fi fs.FileInfo, uid int) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !fi.IsDir():
		return "is not a directory"
	case ownerOf(fi) != uid:
		return fmt.Sprintf("is owned by uid %d, not by you (uid %d)", ownerOf(fi), uid)
	case fi.Mode().Perm() != 0o700:
		return fmt.Sprintf("has mode %#o, want 0700", fi.Mode().Perm())
	}
	return ""
}

// CheckSocketDir returns an error wrapping [ErrUnsafeSocket] unless the
// directory holding the socket at path is one only the user can change: a
// real directory (not a symbolic link), owned by the user, with mode 0700.
// It is the rule the daemon applies to the directory it listens in; a client
// checks it before connecting, so that another local user cannot stand in
// for the daemon by making the directory first.
func CheckSocketDir(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if reason := dirProblem(fi, os.Getuid()); reason != "" {
		return fmt.Errorf("%w: the socket directory %s %s (only a directory the user alone can change is trusted)", ErrUnsafeSocket, dir, reason)
	}
	return nil
}

// CheckPeer returns an error wrapping [ErrUnsafeSocket] unless the process
// at the other end of c runs as the user or as root (its credentials read
// with SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS).
func CheckPeer(c *net.UnixConn) error {
	uid, err := PeerUID(c)
	if err != nil {
		return fmt.Errorf("%w: cannot tell who serves the socket: %v", ErrUnsafeSocket, err)
	}
	if own := os.Getuid(); uid != own && uid != 0 {
		return fmt.Errorf("%w: the process serving it runs as uid %d, not as you (uid %d) or root", ErrUnsafeSocket, uid, own)
	}
	return nil
}

// Listener is the daemon's listening socket. Closing it removes the socket
// file and releases the lock that keeps a second daemon out.
type Listener struct {
	*net.UnixListener
	path string
	lock *os.File
}

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

// Close stops listening, removes the socket file and releases the lock.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if l.lock != nil {
		_ = unix.Flock(int(l.lock.Fd()), unix.LOCK_UN)
		_ = l.lock.Close()
		l.lock = nil
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Listen prepares the socket directory (created 0700 when missing; an
// existing one must pass [CheckSocketDir], except the default directory in
// the user's private space, which is tightened to 0700), makes sure no other daemon serves on path, and listens there with
// the socket file at mode 0600. A socket file left by a daemon that died is
// removed only after a dial proves nobody listens on it; a live one makes
// Listen fail with an error wrapping [ErrDaemonRunning].
func Listen(path string) (*Listener, error) {
	if path == "" {
		return nil, errors.New("listen: empty socket path")
	}
	if max := maxSocketPath(runtime.GOOS); len(path) > max {
		return nil, fmt.Errorf("listen: socket path %s is %d bytes, longer than the %d this OS allows", path, len(path), max)
	}
	uid := os.Getuid()
	if err := prepareDir(filepath.Dir(path), uid, policyFor(path)); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}

	// The lock file closes the race between two daemons that both find a
	// stale socket: only the holder may remove and recreate it.
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("listen: lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by a running daemon (stop it first, or pass --socket)", ErrDaemonRunning, path)
		}
		return nil, fmt.Errorf("listen: lock %s.lock: %w", path, err)
	}
	l, err := listenLocked(path)
	if err != nil {
		_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		lock.Close()
		return nil, err
	}
	l.lock = lock
	return l, nil
}

// listenLocked does Listen's work once the lock is held.
func listenLocked(path string) (*Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("listen: %s exists and is not a socket; refusing to remove it", path)
		}
		c, derr := net.DialTimeout("unix", path, 2*time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s answers (stop that daemon first, or pass --socket)", ErrDaemonRunning, path)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) && !errors.Is(derr, fs.ErrNotExist) {
			return nil, fmt.Errorf("listen: cannot tell whether %s is still served: %w", path, derr)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("listen: remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ul.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, fmt.Errorf("listen: chmod socket: %w", err)
	}
	return &Listener{UnixListener: ul, path: path}, nil
}

// PeerUID returns the user id of the process at the other end of a Unix
// socket connection (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS).
func PeerUID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	uid := -1
	var serr error
	if err := rc.Control(func(fd uintptr) { uid, serr = peerUID(int(fd)) }); err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	if serr != nil {
		return -1, fmt.Errorf("peer uid: %w", serr)
	}
	return uid, nil
}
