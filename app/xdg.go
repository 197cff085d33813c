package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Names of the Linux login items.
const (
	// SystemdUnit is the systemd user unit that runs the daemon.
	SystemdUnit = "startlux.service"
	// AutostartEntry is the XDG autostart entry that starts the app.
	AutostartEntry = "startlux-app.desktop"
)

// XDGSystem is the [System] for Linux desktops: the daemon runs as a
// systemd user service when its unit is installed (and systemctl works),
// otherwise as the app's child; "Start at Login" writes both the unit
// (enabled) and an XDG autostart entry for the app, and removes both.
type XDGSystem struct {
	// DaemonPath is the startlux executable ("" when it was not found);
	// AppPath is this app's.
	DaemonPath, AppPath string
	// DaemonArgs follow "serve" when the app runs the daemon (e.g.
	// --socket); they go into the unit's ExecStart too.
	DaemonArgs []string
	// ConfigHome is $XDG_CONFIG_HOME (~/.config by default): the unit goes
	// to systemd/user/, the entry to autostart/.
	ConfigHome string
	// LogFile receives a child daemon's output.
	LogFile string
	// Systemctl is the systemctl executable; "" when there is none, and
	// the unit is then written but not enabled or started.
	Systemctl string

	child child
}

// NewXDGSystem finds the executables and the XDG folders of this user.
func NewXDGSystem(daemonArgs []string) (*XDGSystem, error) {
	// A missing daemon executable is reported when the daemon is started,
	// so the app can still show the menu of a daemon running elsewhere.
	daemon, _ := siblingExecutable("startlux")
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the app executable: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("home folder: %w", err)
	}
	config := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(config) {
		config = filepath.Join(home, ".config")
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		state = filepath.Join(home, ".local", "state")
	}
	s := &XDGSystem{
		DaemonPath: daemon,
		AppPath:    self,
		DaemonArgs: daemonArgs,
		ConfigHome: config,
		LogFile:    filepath.Join(state, "startlux", "daemon.log"),
	}
	if p, err := exec.LookPath("systemctl"); err == nil {
		s.Systemctl = p
	}
	return s, nil
}

func (s *XDGSystem) unitPath() string {
	return filepath.Join(s.ConfigHome, "systemd", "user", SystemdUnit)
}

func (s *XDGSystem) autostartPath() string {
	return filepath.Join(s.ConfigHome, "autostart", AutostartEntry)
}

// systemctl runs systemctl --user with args.
func (s *XDGSystem) systemctl(ctx context.Context, args ...string) error {
	if s.Systemctl == "" {
		return errors.New("no systemctl")
	}
	out, err := exec.CommandContext(ctx, s.Systemctl, append([]string{"--user"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl --user %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// systemctlOutput runs systemctl --user with args and returns its trimmed
// standard output, with the error of a non-zero exit.
func (s *XDGSystem) systemctlOutput(ctx context.Context, args ...string) (string, error) {
	if s.Systemctl == "" {
		return "", errors.New("no systemctl")
	}
	out, err := exec.CommandContext(ctx, s.Systemctl, append([]string{"--user"}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// serviceUsable reports whether the daemon can be run through systemd: the
// unit is installed and systemctl reaches the user manager.
func (s *XDGSystem) serviceUsable(ctx context.Context) bool {
	if _, err := os.Stat(s.unitPath()); err != nil || s.Systemctl == "" {
		return false
	}
	return s.systemctl(ctx, "show-environment") == nil
}

// StartDaemon implements [System].
func (s *XDGSystem) StartDaemon(ctx context.Context) (string, error) {
	if s.serviceUsable(ctx) {
		if err := s.systemctl(ctx, "start", SystemdUnit); err == nil {
			return "", nil
		}
	}
	return "", s.child.start(s.DaemonPath, append([]string{"serve"}, s.DaemonArgs...), s.LogFile)
}

// RestartDaemon implements [System].
func (s *XDGSystem) RestartDaemon(ctx context.Context, pid int) error {
	if s.child.running() {
		if err := s.child.stop(); err != nil {
			return err
		}
	} else if s.serviceUsable(ctx) && s.systemctl(ctx, "is-active", "--quiet", SystemdUnit) == nil {
		return s.systemctl(ctx, "restart", SystemdUnit)
	} else if pid > 0 {
		if err := terminatePID(ctx, pid); err != nil {
			return err
		}
	}
	_, err := s.StartDaemon(ctx)
	return err
}

// LoginItem implements [System]: on when the autostart entry exists.
func (s *XDGSystem) LoginItem(ctx context.Context) (bool, error) {
	_, err := os.Stat(s.autostartPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("start at login: %w", err)
	}
	return true, nil
}

// SetLoginItem implements [System].
func (s *XDGSystem) SetLoginItem(ctx context.Context, on bool) error {
	if !on {
		if s.Systemctl != "" {
			if _, err := os.Stat(s.unitPath()); err == nil {
				s.systemctl(ctx, "disable", SystemdUnit) // a unit never enabled is fine
			}
		}
		for _, p := range []string{s.autostartPath(), s.unitPath()} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("start at login: %w", err)
			}
		}
		if s.Systemctl != "" {
			s.systemctl(ctx, "daemon-reload")
		}
		return nil
	}
	if err := writeFile(s.unitPath(), s.Unit()); err != nil {
		return err
	}
	if err := writeFile(s.autostartPath(), s.Autostart()); err != nil {
		return err
	}
	if s.Systemctl != "" && s.systemctl(ctx, "show-environment") == nil {
		if err := s.systemctl(ctx, "daemon-reload"); err != nil {
			return err
		}
		if err := s.systemctl(ctx, "enable", SystemdUnit); err != nil {
			return err
		}
	}
	return nil
}

// Unit returns the systemd user unit that runs the daemon.
func (s *XDGSystem) Unit() string {
	argv := append([]string{s.DaemonPath, "serve"}, s.DaemonArgs...)
	var q []string
	for _, a := range argv {
		q = append(q, systemdQuote(a))
	}
	return "[Unit]\n" +
		"Description=StartLux decision daemon\n" +
		"Documentation=https://github.com/startlux/startlux\n\n" +
		"[Service]\n" +
		"ExecStart=" + strings.Join(q, " ") + "\n" +
		"Restart=on-failure\n" +
		"RestartSec=2\n\n" +
		"[Install]\n" +
		"WantedBy=default.target\n"
}

// Autostart returns the XDG autostart entry that starts the app at login.
func (s *XDGSystem) Autostart() string {
	return "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Name=StartLux\n" +
		"Comment=Menu-bar app of the StartLux decision service\n" +
		"Exec=" + desktopQuote(s.AppPath) + "\n" +
		"Terminal=false\n" +
		"NoDisplay=true\n" +
		"X-GNOME-Autostart-enabled=true\n"
}

// OpenFolder implements [System] with xdg-open.
func (s *XDGSystem) OpenFolder(ctx context.Context, dir string) error {
	return openFolder(dir, "xdg-open")
}

// AskText implements [System] with zenity, or kdialog.
func (s *XDGSystem) AskText(ctx context.Context, title, prompt string) (string, bool, error) {
	return askWith(ctx, linuxDialogs, exec.LookPath, title, prompt)
}

// Stop implements [System].
func (s *XDGSystem) Stop() error { return s.child.stop() }

// openFolder creates dir and hands it to opener without waiting for it.
func openFolder(dir, opener string) error {
	if dir == "" {
		return errors.New("no folder given")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	cmd := exec.Command(opener, dir)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	go cmd.Wait()
	return nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("start at login: %w", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("start at login: %w", err)
	}
	return nil
}

// systemdQuote quotes one ExecStart word when it needs it.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// desktopQuote quotes an Exec path as the Desktop Entry spec requires.
func desktopQuote(s string) string {
	if !strings.ContainsAny(s, " \t\n\"'\\><~|&;$*?#()`%=") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\\\`, `"`, `\\"`, "`", "\\\\`", `$`, `\\$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}
