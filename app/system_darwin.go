package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// SMAppServiceStatus values (ServiceManagement, macOS 13).
const (
	smNotRegistered    = 0
	smEnabled          = 1
	smRequiresApproval = 2
	smNotFound         = 3
)

// agentLabel and agentPlist name the daemon's LaunchAgent in the bundle
// (Contents/Library/LaunchAgents).
const (
	agentLabel = "dev.startlux.daemon"
	agentPlist = agentLabel + ".plist"
)

// DarwinSystem is the [System] for macOS: the daemon is the bundle's
// LaunchAgent registered through SMAppService (falling back to a child
// process while the agent is not approved, or outside a bundle), and
// "Start at Login" is SMAppService.mainAppService.
type DarwinSystem struct {
	// DaemonPath is the startlux executable (Contents/Helpers/startlux in
	// the bundle; "" when it was not found).
	DaemonPath string
	// DaemonArgs follow "serve" when the app runs the daemon as a child.
	DaemonArgs []string
	// LogFile receives a child daemon's output.
	LogFile string
	// InBundle is true when the app runs from StartLux.app; SMAppService
	// works only then.
	InBundle bool

	oc    *appObjC
	child child

	mu             sync.Mutex // guards openedSettings
	openedSettings bool
}

// NewSystem returns the macOS system of this process.
func NewSystem(daemonArgs []string) (System, error) {
	oc, err := loadObjC()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the app executable: %w", err)
	}
	// In the bundle the daemon is Contents/Helpers/startlux (it cannot sit
	// next to Contents/MacOS/StartLux: the file system ignores case).
	// Elsewhere it is looked for next to the app, then on PATH. A missing
	// one is reported when the daemon is started, so the app can still show
	// a daemon running elsewhere.
	daemon := filepath.Join(filepath.Dir(self), "..", "Helpers", "startlux")
	if st, err := os.Stat(daemon); err != nil || !st.Mode().IsRegular() {
		daemon, _ = siblingExecutable("startlux")
	} else {
		daemon = filepath.Clean(daemon)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("home folder: %w", err)
	}
	macos := filepath.Dir(self)
	inBundle := filepath.Base(macos) == "MacOS" && strings.HasSuffix(filepath.Dir(filepath.Dir(macos)), ".app")
	return &DarwinSystem{
		DaemonPath: daemon,
		DaemonArgs: daemonArgs,
		LogFile:    filepath.Join(home, "Library", "Logs", "StartLux", "daemon.log"),
		InBundle:   inBundle,
		oc:         oc,
	}, nil
}

func (s *DarwinSystem) agentService() objc.ID {
	return s.oc.cls.SMAppService.Send(s.oc.sel.agentService, s.oc.NSString(agentPlist))
}

func (s *DarwinSystem) mainAppService() objc.ID {
	return s.oc.cls.SMAppService.Send(s.oc.sel.mainAppService)
}

// serviceStatus returns an SMAppService's status (SMAppServiceStatus, an
// NSInteger).
func (s *DarwinSystem) serviceStatus(svc objc.ID) int {
	return s.oc.SendInt(svc, s.oc.sel.status)
}

// callWithError sends registerAndReturnError: or unregisterAndReturnError:
// (BOOL, NSError **) and turns a NO into the NSError; call inside a pool.
func (s *DarwinSystem) callWithError(svc objc.ID, selector objc.SEL) error {
	var nserr objc.ID
	if s.oc.SendBoolPtr(svc, selector, unsafe.Pointer(&nserr)) {
		return nil
	}
	if e := s.oc.Error(nserr); e != nil {
		return e
	}
	return errors.New("unknown error")
}

// serviceManagement reports whether SMAppService can be used: in the
// bundle, on macOS 13 or later.
func (s *DarwinSystem) serviceManagement() bool {
	return s.InBundle && s.oc.cls.SMAppService != 0
}

func (s *DarwinSystem) startChild() error {
	return s.child.start(s.DaemonPath, append([]string{"serve"}, s.DaemonArgs...), s.LogFile)
}

// StartDaemon implements [System].
func (s *DarwinSystem) StartDaemon(ctx context.Context) (string, error) {
	if !s.serviceManagement() {
		return "", s.startChild()
	}
	var status int
	var regErr error
	s.oc.Pool(func() {
		svc := s.agentService()
		status = s.serviceStatus(svc)
		if status == smNotRegistered || status == smNotFound {
			regErr = s.callWithError(svc, s.oc.sel.register)
			status = s.serviceStatus(svc)
		}
	})
	switch {
	case status == smEnabled:
		// launchd runs it (KeepAlive); kick it in case it is waiting out a
		// crash throttle.
		exec.CommandContext(ctx, "/bin/launchctl", "kickstart", s.agentTarget()).Run()
		return "", nil
	case status == smRequiresApproval:
		s.mu.Lock()
		first := !s.openedSettings
		s.openedSettings = true
		s.mu.Unlock()
		if first {
			s.oc.Pool(func() { s.oc.cls.SMAppService.Send(s.oc.sel.openLoginItems) })
		}
		return "Allow StartLux in System Settings › General › Login Items; until then the daemon runs as the app's child",
			s.startChild()
	default:
		notice := "The daemon's login agent could not be registered"
		if regErr != nil {
			notice += ": " + regErr.Error()
		}
		return notice + "; it runs as the app's child", s.startChild()
	}
}

// agentTarget is the launchd service target of the daemon's agent.
func (s *DarwinSystem) agentTarget() string {
	return fmt.Sprintf("gui/%d/%s", os.Getuid(), agentLabel)
}

func (s *DarwinSystem) agentEnabled() bool {
	if !s.serviceManagement() {
		return false
	}
	var st int
	s.oc.Pool(func() { st = s.serviceStatus(s.agentService()) })
	return st == smEnabled
}

// RestartDaemon implements [System].
func (s *DarwinSystem) RestartDaemon(ctx context.Context, pid int) error {
	switch {
	case s.child.running():
		if err := s.child.stop(); err != nil {
			return err
		}
	case s.agentEnabled():
		out, err := exec.CommandContext(ctx, "/bin/launchctl", "kickstart", "-k", s.agentTarget()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("launchctl kickstart -k %s: %w: %s", s.agentTarget(), err, strings.TrimSpace(string(out)))
		}
		return nil
	case pid > 0:
		if err := terminatePID(ctx, pid); err != nil {
			return err
		}
	}
	_, err := s.StartDaemon(ctx)
	return err
}

// LoginItem implements [System]: whether SMAppService.mainAppService is
// enabled (or registered and awaiting approval).
func (s *DarwinSystem) LoginItem(ctx context.Context) (bool, error) {
	if !s.serviceManagement() {
		return false, errors.New("start at login needs StartLux.app (macOS 13 or later)")
	}
	var st int
	s.oc.Pool(func() { st = s.serviceStatus(s.mainAppService()) })
	return st == smEnabled || st == smRequiresApproval, nil
}

// SetLoginItem implements [System].
func (s *DarwinSystem) SetLoginItem(ctx context.Context, on bool) error {
	if !s.serviceManagement() {
		return errors.New("start at login needs StartLux.app (macOS 13 or later)")
	}
	var err error
	s.oc.Pool(func() {
		if on {
			err = s.callWithError(s.mainAppService(), s.oc.sel.register)
		} else {
			err = s.callWithError(s.mainAppService(), s.oc.sel.unregister)
		}
	})
	return err
}

// OpenFolder implements [System] with open(1).
func (s *DarwinSystem) OpenFolder(ctx context.Context, dir string) error {
	return openFolder(dir, "/usr/bin/open")
}

// Stop implements [System].
func (s *DarwinSystem) Stop() error { return s.child.stop() }
