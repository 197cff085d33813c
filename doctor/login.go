package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/startlux/startlux/app"
)

// LoginItem is how StartLux starts at login: on macOS the SMAppService
// statuses of the app and of the daemon's LaunchAgent, elsewhere the XDG
// autostart entry and the systemd user unit.
type LoginItem struct {
	Check
	// Source says where the states were read: the app's own
	// --login-status (macOS, where only the app can ask SMAppService), or
	// the files (elsewhere).
	Source string               `json:"source"`
	Items  []app.LoginItemState `json:"items"`
}

func checkLoginItem(ctx context.Context, opts Options) LoginItem {
	read := systemLoginItems
	if opts.LoginItems != nil {
		read = opts.LoginItems
	}
	l, err := read(ctx)
	if err != nil {
		l.Check = failed(err)
	} else {
		l.Check = ok()
	}
	if l.Items == nil {
		l.Items = []app.LoginItemState{}
	}
	return l
}

// systemLoginItems reads this system's login items.
func systemLoginItems(ctx context.Context) (LoginItem, error) {
	if runtime.GOOS == "darwin" {
		return appLoginItems(ctx)
	}
	s, err := app.NewXDGSystem(nil)
	if err != nil {
		return LoginItem{}, err
	}
	items, err := s.LoginItems(ctx)
	return LoginItem{Source: "XDG files", Items: items}, err
}

// appLoginItems runs the app's --login-status: SMAppService answers for
// the calling process's main bundle, so only StartLux.app's own executable
// can read its statuses.
func appLoginItems(ctx context.Context) (LoginItem, error) {
	exe, err := findApp()
	if err != nil {
		return LoginItem{}, err
	}
	l := LoginItem{Source: exe + " --login-status"}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "--login-status")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return l, fmt.Errorf("%s --login-status: %w: %s", exe, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, &l.Items); err != nil {
		return l, fmt.Errorf("%s --login-status: %w", exe, err)
	}
	return l, nil
}

// findApp returns the app's executable: next to this one in the bundle
// (Contents/Helpers/startlux → Contents/MacOS/StartLux), else in
// /Applications.
func findApp() (string, error) {
	var cands []string
	if self, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(self), "..", "MacOS", "StartLux"))
	}
	cands = append(cands, "/Applications/StartLux.app/Contents/MacOS/StartLux")
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("StartLux.app not found (looked next to this program and in /Applications); only the app can read its SMAppService status")
}
