package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// child runs the daemon as a child process of the app, its output appended
// to a log file. The zero value is ready to use.
type child struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// running reports whether the child is alive.
func (c *child) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// start runs path with args unless a child is already running. The child
// gets its own process group, so a Ctrl-C meant for the app does not reach
// it; the app stops it on quit.
func (c *child) start(path string, args []string, logFile string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		select {
		case <-c.done:
		default:
			return nil
		}
	}
	if path == "" {
		return errors.New("cannot find the startlux executable next to the app or on PATH")
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("run %s: %w", path, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	c.cmd, c.done = cmd, done
	return nil
}

// stop ends the child: SIGTERM, then SIGKILL after 10 s. It is a no-op
// when no child runs.
func (c *child) stop() error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop the daemon: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("stop the daemon: it ignored SIGTERM for 10 s and was killed")
	}
}

// terminatePID stops a daemon the app did not start (one found on the
// socket, with the pid its status reported) and waits until it is gone.
func terminatePID(ctx context.Context, pid int) error {
	if pid <= 1 || pid == os.Getpid() {
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop the daemon (pid %d): %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the daemon (pid %d) did not stop: %w", pid, ctx.Err())
		case <-t.C:
		}
	}
}

// siblingExecutable returns the file name next to the running executable,
// or, failing that, the name found on PATH.
func siblingExecutable(name string) (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("cannot find the %s executable next to the app or on PATH", name)
	}
	return filepath.Abs(p)
}
