// Package settings keeps the menu-bar app's settings that the daemon reads
// too, in one small JSON file: the app writes it when the user changes a
// setting, and "startlux serve" reads it at start (a command-line flag
// still wins), so a setting holds across restarts of either, whoever
// started the daemon (the login agent's arguments are fixed in the
// bundle).
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/startlux/startlux/internal/atomicfile"
)

// Settings are the app's settings; a zero field is a setting never made
// (the daemon's default applies).
type Settings struct {
	// IdleUnload is how long the daemon waits without a decision before it
	// unloads the model, a Go duration ("30m0s"; "0s": never).
	IdleUnload string `json:"idle_unload,omitempty"`
	// Int8 is the menu's "Use int8": every model the app loads (a switch,
	// or the daemon's model when the app finds it served the other way)
	// runs its large projections as int8 products.
	Int8 bool `json:"int8,omitempty"`
}

// IdleUnloadDuration returns the idle-unload setting, and whether there is
// one.
func (s Settings) IdleUnloadDuration() (time.Duration, bool, error) {
	if s.IdleUnload == "" {
		return 0, false, nil
	}
	d, err := time.ParseDuration(s.IdleUnload)
	if err != nil || d < 0 {
		return 0, false, fmt.Errorf("idle_unload %q: want a duration such as 30m, or 0s for never", s.IdleUnload)
	}
	return d, true, nil
}

// SetIdleUnload records the idle-unload setting.
func (s *Settings) SetIdleUnload(d time.Duration) { s.IdleUnload = max(d, 0).String() }

// File is the settings file's name in its folder.
const File = "settings.json"

// Path returns where the settings are kept: ~/Library/Application
// Support/StartLux/settings.json on macOS, $XDG_CONFIG_HOME/startlux/
// settings.json (~/.config by default) elsewhere.
func Path() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("settings: %w", err)
	}
	return path(runtime.GOOS, home, os.Getenv("XDG_CONFIG_HOME")), nil
}

func path(goos, home, xdgConfig string) string {
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "StartLux", File)
	}
	if !filepath.IsAbs(xdgConfig) {
		xdgConfig = filepath.Join(home, ".config")
	}
	return filepath.Join(xdgConfig, "startlux", File)
}

// maxFile bounds the settings file read.
const maxFile = 1 << 20

// Load reads the settings at path; a file that does not exist is no
// settings made.
func Load(path string) (Settings, error) {
	var s Settings
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return s, fmt.Errorf("settings: %w", err)
	case len(data) > maxFile:
		return s, fmt.Errorf("settings: %s is %d bytes, not a settings file", path, len(data))
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("settings: %s: %w", path, err)
	}
	if _, _, err := s.IdleUnloadDuration(); err != nil {
		return s, fmt.Errorf("settings: %s: %w", path, err)
	}
	return s, nil
}

// Save writes the settings to path, replacing the file at once (a reader
// sees the old settings or the new), making its folder if need be.
func Save(path string, s Settings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600, ""); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return nil
}

// Update loads the settings at path, applies change and saves them.
func Update(path string, change func(*Settings)) error {
	s, err := Load(path)
	if err != nil {
		return err
	}
	change(&s)
	return Save(path, s)
}
