package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/startlux/startlux/internal/objcrt"
)

// This file holds the decisions the macOS system makes about the daemon's
// LaunchAgent, as pure functions over plain data so that they are tested on
// any machine (system_darwin.go carries them out through SMAppService).

// SMAppServiceStatus values (SMAppService.h, an NSInteger).
const (
	smNotRegistered    = 0
	smEnabled          = 1
	smRequiresApproval = 2
	smNotFound         = 3
)

// Service Management error codes (SMErrors.h).
const (
	smErrInvalidSignature  = 3
	smErrJobNotFound       = 6
	smErrAlreadyRegistered = 12
)

// agentLabel and agentPlist name the daemon's LaunchAgent in the bundle
// (Contents/Library/LaunchAgents).
const (
	agentLabel = "dev.startlux.daemon"
	agentPlist = agentLabel + ".plist"
)

// NotSignedNotice is what the menu says when SMAppService refuses the app
// for its code signature (a bundle built off a Mac is not sealed); the app
// then runs the daemon as its child.
const NotSignedNotice = "Login item unavailable: the app is not signed; see docs/app.md"

// errNotSigned is the error of login-item calls once the signature is
// known to be refused.
var errNotSigned = errors.New("login item unavailable: the app is not signed; see docs/app.md")

// agentBuild identifies what a registration of the LaunchAgent was made
// for: the bytes of the agent's plist and of the executable it runs.
// SMAppService.h: "If an app updates either the plist or the executable for
// a LaunchAgent or LaunchDaemon, the SMAppService must be re-registered or
// it may not launch."
type agentBuild struct {
	Plist      string `json:"plist_sha256"`
	Executable string `json:"executable_sha256"`
}

// agentFiles returns the agent plist and the daemon executable of the
// bundle at app (the StartLux.app directory).
func agentFiles(app string) (plist, exe string) {
	return filepath.Join(app, "Contents", "Library", "LaunchAgents", agentPlist),
		filepath.Join(app, "Contents", "Helpers", "startlux")
}

// readAgentBuild hashes the bundle's agent plist and daemon executable.
func readAgentBuild(app string) (agentBuild, error) {
	plist, exe := agentFiles(app)
	var b agentBuild
	var err error
	if b.Plist, err = hashFile(plist); err != nil {
		return agentBuild{}, err
	}
	if b.Executable, err = hashFile(exe); err != nil {
		return agentBuild{}, err
	}
	return b, nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("agent build: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("agent build: %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// loadAgentRecord reads the build the agent was last registered for; nil
// (and no error) when none was recorded.
func loadAgentRecord(path string) (*agentBuild, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent record: %w", err)
	}
	var b agentBuild
	if err := json.Unmarshal(data, &b); err != nil || b.Plist == "" || b.Executable == "" {
		return nil, fmt.Errorf("agent record %s: unreadable, so the agent is registered again", path)
	}
	return &b, nil
}

// saveAgentRecord records the build the agent is now registered for.
func saveAgentRecord(path string, b agentBuild) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("agent record: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("agent record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("agent record: %w", err)
	}
	return nil
}

// agentAction is what StartDaemon does with the LaunchAgent's registration.
type agentAction int

const (
	// agentKeep: registered for this very build; nothing to do.
	agentKeep agentAction = iota
	// agentRegister: not registered; register.
	agentRegister
	// agentReregister: registered, but for another build or for one not
	// recorded (an older app, a lost record); unregister (recommended by
	// SMAppService.h when the executable changed), wait for launchd to
	// drop the job, then register.
	agentReregister
)

func (a agentAction) String() string {
	return [...]string{"keep", "register", "re-register"}[a]
}

// planAgent decides from the agent's SMAppService status, the build it was
// last registered for (nil: none recorded) and the bundle's current build
// (nil: it could not be read, so nothing can be compared or recorded).
func planAgent(status int, recorded, current *agentBuild) agentAction {
	switch status {
	case smEnabled, smRequiresApproval:
		if current == nil || (recorded != nil && *recorded == *current) {
			return agentKeep
		}
		return agentReregister
	default: // not registered, not found, or a status this code does not know
		return agentRegister
	}
}

// smDomainsFallback are the Service Management error domains assumed when
// the framework's own constants cannot be read.
var smDomainsFallback = []string{"SMAppServiceErrorDomain"}

// isSMError reports whether err is a Service Management NSError with the
// code; domains are the framework's error domains.
func isSMError(err error, code int, domains []string) bool {
	var ns *objcrt.NSError
	if !errors.As(err, &ns) || ns.Code != code {
		return false
	}
	if len(domains) == 0 {
		domains = smDomainsFallback
	}
	return slices.Contains(domains, ns.Domain)
}

// registerFailure turns a failed registration of the LaunchAgent into the
// menu's notice, and reports whether the failure is the app's signature:
// kSMErrorInvalidSignature, or any failure of a bundle that carries no seal
// (Contents/_CodeSignature/CodeResources, which only codesign on a Mac
// writes). Either way the app goes on running the daemon as its child.
func registerFailure(err error, sealed bool, domains []string) (notice string, notSigned bool) {
	if isSMError(err, smErrInvalidSignature, domains) || (err != nil && !sealed) {
		return NotSignedNotice, true
	}
	notice = "The daemon's login agent could not be registered"
	if err != nil {
		notice += ": " + err.Error()
	}
	return notice + "; it runs as the app's child", false
}

// bundleSealed reports whether the bundle at app carries codesign's seal
// of its resources.
func bundleSealed(app string) bool {
	st, err := os.Stat(filepath.Join(app, "Contents", "_CodeSignature", "CodeResources"))
	return err == nil && st.Mode().IsRegular()
}

// bundleOf returns the .app directory of an executable in
// NAME.app/Contents/MacOS, or "".
func bundleOf(exe string) string {
	macos := filepath.Dir(exe)
	app := filepath.Dir(filepath.Dir(macos))
	if filepath.Base(macos) == "MacOS" && filepath.Base(filepath.Dir(macos)) == "Contents" && strings.HasSuffix(app, ".app") {
		return app
	}
	return ""
}
