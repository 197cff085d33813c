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
	"time"
	"unsafe"

	"github.com/ebitengine/purego/objc"
)

// DarwinSystem is the [System] for macOS: the daemon is the bundle's
// LaunchAgent registered through SMAppService (falling back to a child
// process while the agent is not approved, when the app's signature is
// refused, or outside a bundle), and "Start at Login" is
// SMAppService.mainAppService.
type DarwinSystem struct {
	// DaemonPath is the startlux executable (Contents/Helpers/startlux in
	// the bundle; "" when it was not found).
	DaemonPath string
	// DaemonArgs follow "serve" when the app runs the daemon as a child.
	DaemonArgs []string
	// LogFile receives a child daemon's output.
	LogFile string
	// Bundle is the StartLux.app directory the app runs from ("" outside
	// a bundle); SMAppService works only in one.
	Bundle string
	// RecordFile keeps the build the LaunchAgent was last registered for,
	// so that an updated plist or executable is registered again.
	RecordFile string

	oc    *appObjC
	child child

	mu             sync.Mutex // guards the fields below
	openedSettings bool
	notSigned      bool // SMAppService refused the app's signature
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
	return &DarwinSystem{
		DaemonPath: daemon,
		DaemonArgs: daemonArgs,
		LogFile:    filepath.Join(home, "Library", "Logs", "StartLux", "daemon.log"),
		Bundle:     bundleOf(self),
		RecordFile: filepath.Join(home, "Library", "Application Support", "StartLux", "agent-registration.json"),
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
// (BOOL, NSError **) and turns a NO into the NSError (an *objcrt.NSError);
// call inside a pool.
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
	return s.Bundle != "" && s.oc.cls.SMAppService != 0
}

// signatureRefused reports whether SMAppService refused the app's
// signature before.
func (s *DarwinSystem) signatureRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notSigned
}

func (s *DarwinSystem) startChild() error {
	return s.child.start(s.DaemonPath, append([]string{"serve"}, s.DaemonArgs...), s.LogFile)
}

// StartDaemon implements [System]: it registers the daemon's LaunchAgent
// (again when the bundle's plist or executable changed since the recorded
// registration), and runs the daemon as the app's child whenever launchd
// will not run it yet.
func (s *DarwinSystem) StartDaemon(ctx context.Context) (string, error) {
	if !s.serviceManagement() {
		return "", s.startChild()
	}
	if s.signatureRefused() {
		return NotSignedNotice, s.startChild()
	}
	status, regErr := s.registerAgent(ctx)
	switch {
	case regErr == nil && status == smEnabled:
		// launchd runs it (KeepAlive); kick it in case it is waiting out a
		// crash throttle.
		exec.CommandContext(ctx, "/bin/launchctl", "kickstart", s.agentTarget()).Run()
		return "", nil
	case regErr == nil && status == smRequiresApproval:
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
		if regErr == nil {
			regErr = fmt.Errorf("SMAppService status %d after registering", status)
		}
		notice, notSigned := registerFailure(regErr, bundleSealed(s.Bundle), s.oc.smDomains)
		if notSigned {
			s.mu.Lock()
			s.notSigned = true
			s.mu.Unlock()
		}
		return notice, s.startChild()
	}
}

// registerAgent brings the LaunchAgent's registration up to date with the
// bundle (planAgent) and returns its status afterwards.
func (s *DarwinSystem) registerAgent(ctx context.Context) (int, error) {
	var cur *agentBuild
	if b, err := readAgentBuild(s.Bundle); err == nil {
		cur = &b
	}
	rec, _ := loadAgentRecord(s.RecordFile) // unreadable: re-register
	var status int
	s.oc.Pool(func() { status = s.serviceStatus(s.agentService()) })
	action := planAgent(status, rec, cur)
	if action == agentKeep {
		return status, nil
	}
	if action == agentReregister {
		var err error
		s.oc.Pool(func() { err = s.callWithError(s.agentService(), s.oc.sel.unregister) })
		if err != nil && !isSMError(err, smErrJobNotFound, s.oc.smDomains) {
			return status, fmt.Errorf("unregister the agent of the previous build: %w", err)
		}
		// unregisterAndReturnError: does not wait for the job to go.
		s.waitAgentGone(ctx)
	}
	var err error
	s.oc.Pool(func() {
		svc := s.agentService()
		err = s.callWithError(svc, s.oc.sel.register)
		if isSMError(err, smErrAlreadyRegistered, s.oc.smDomains) {
			err = nil
		}
		status = s.serviceStatus(svc)
	})
	if err == nil && cur != nil && (status == smEnabled || status == smRequiresApproval) {
		// A failure to record only means registering again next time.
		_ = saveAgentRecord(s.RecordFile, *cur)
	}
	return status, err
}

// waitAgentGone waits (up to 5 s) until launchd no longer knows the
// agent's job.
func (s *DarwinSystem) waitAgentGone(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for exec.CommandContext(ctx, "/bin/launchctl", "print", s.agentTarget()).Run() == nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
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
	if s.signatureRefused() {
		return false, errNotSigned
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
	if _, notSigned := registerFailure(err, bundleSealed(s.Bundle), s.oc.smDomains); err != nil && notSigned {
		s.mu.Lock()
		s.notSigned = true
		s.mu.Unlock()
		return errNotSigned
	}
	return err
}

// OpenFolder implements [System] with open(1).
func (s *DarwinSystem) OpenFolder(ctx context.Context, dir string) error {
	return openFolder(dir, "/usr/bin/open")
}

// AskText implements [System] with AppleScript's display dialog.
func (s *DarwinSystem) AskText(ctx context.Context, title, prompt string) (string, bool, error) {
	return askWith(ctx, []dialogCommand{macDialog}, exec.LookPath, title, prompt)
}

// Stop implements [System].
func (s *DarwinSystem) Stop() error { return s.child.stop() }

var _ LoginItemLister = (*DarwinSystem)(nil)

// LoginItems implements [LoginItemLister]: the SMAppService statuses of the
// app (Start at Login) and of the daemon's LaunchAgent. Only the app can
// read them: SMAppService answers for the calling process's main bundle.
func (s *DarwinSystem) LoginItems(ctx context.Context) ([]LoginItemState, error) {
	if !s.serviceManagement() {
		return nil, errors.New("SMAppService needs the app running from StartLux.app on macOS 13 or later")
	}
	var mainSt, agentSt int
	s.oc.Pool(func() {
		mainSt = s.serviceStatus(s.mainAppService())
		agentSt = s.serviceStatus(s.agentService())
	})
	var cur *agentBuild
	if b, err := readAgentBuild(s.Bundle); err == nil {
		cur = &b
	}
	rec, _ := loadAgentRecord(s.RecordFile)
	plist, _ := agentFiles(s.Bundle)
	return []LoginItemState{
		{Name: "Start at Login", Kind: "SMAppService.mainApp", Path: s.Bundle, State: serviceStatusName(mainSt), Detail: sealDetail(bundleSealed(s.Bundle))},
		{Name: "daemon", Kind: "SMAppService agent", Path: plist, State: serviceStatusName(agentSt), Detail: agentRecordDetail(rec, cur)},
	}, nil
}
