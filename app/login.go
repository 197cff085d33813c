package app

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
)

// LoginItemState is one login item as the system reports it, for
// diagnostics (startlux-app --login-status, startlux doctor).
type LoginItemState struct {
	// Name says what the item does: "Start at Login" (the app) or "daemon".
	Name string `json:"name"`
	// Kind is the mechanism: "SMAppService.mainApp", "SMAppService agent",
	// "XDG autostart entry" or "systemd user unit".
	Kind string `json:"kind"`
	// Path is the file behind the item, where there is one.
	Path string `json:"path,omitempty"`
	// State is what the system says: for SMAppService its status ("not
	// registered", "enabled", "requires approval", "not found"); for files
	// "present" or "absent", with systemd's is-enabled answer after a
	// comma where systemctl reaches the user manager.
	State string `json:"state"`
	// Detail adds what the app knows besides (the build an agent was
	// registered for).
	Detail string `json:"detail,omitempty"`
}

// LoginItemLister is implemented by the Systems that can report their
// login items.
type LoginItemLister interface {
	LoginItems(ctx context.Context) ([]LoginItemState, error)
}

var (
	_ LoginItemLister = (*XDGSystem)(nil)
)

// serviceStatusName names an SMAppServiceStatus value.
func serviceStatusName(st int) string {
	switch st {
	case smNotRegistered:
		return "not registered"
	case smEnabled:
		return "enabled"
	case smRequiresApproval:
		return "requires approval"
	case smNotFound:
		return "not found"
	}
	return "unknown status " + strconv.Itoa(st)
}

// fileState is "present" or "absent" for path.
func fileState(path string) (string, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return "present", nil
	case errors.Is(err, fs.ErrNotExist):
		return "absent", nil
	}
	return "", err
}

// LoginItems implements [LoginItemLister]: the XDG autostart entry that
// starts the app and the systemd user unit that runs the daemon.
func (s *XDGSystem) LoginItems(ctx context.Context) ([]LoginItemState, error) {
	auto, err := fileState(s.autostartPath())
	if err != nil {
		return nil, err
	}
	unit, err := fileState(s.unitPath())
	if err != nil {
		return nil, err
	}
	if unit == "present" && s.Systemctl != "" && s.systemctl(ctx, "show-environment") == nil {
		// is-enabled exits non-zero for disabled units; its output is the
		// answer either way.
		out, _ := s.systemctlOutput(ctx, "is-enabled", SystemdUnit)
		if out != "" {
			unit += ", " + out
		}
	}
	return []LoginItemState{
		{Name: "Start at Login", Kind: "XDG autostart entry", Path: s.autostartPath(), State: auto},
		{Name: "daemon", Kind: "systemd user unit", Path: s.unitPath(), State: unit},
	}, nil
}

// agentRecordDetail says how the recorded registration of the agent
// relates to the bundle's current build (nil where unknown).
func agentRecordDetail(recorded, current *agentBuild) string {
	switch {
	case current == nil:
		return "the bundle's agent plist or executable cannot be read"
	case recorded == nil:
		return "no registration recorded for this bundle"
	case *recorded == *current:
		return "registered for this build"
	}
	return "registered for another build; the app registers it again when it starts"
}

// sealDetail says whether the bundle carries codesign's seal.
func sealDetail(sealed bool) string {
	if sealed {
		return "the bundle is sealed"
	}
	return "the bundle is not sealed (built off a Mac), so SMAppService refuses it; see docs/app.md"
}
