package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/startlux/startlux/internal/atomicfile"
)

// Settings are the app's own choices, kept across restarts of the app and
// of the daemon in a small JSON file (see [SettingsFile]).
type Settings struct {
	// Int8 is "Use int8": every model the app loads (a switch, or the
	// daemon's model when the app finds it served the other way) runs its
	// large projections as int8 products.
	Int8 bool `json:"int8"`
}

// SettingsFile returns where the app keeps its settings:
// ~/Library/Application Support/StartLux/settings.json on macOS,
// $XDG_CONFIG_HOME/startlux/settings.json (~/.config by default) elsewhere.
func SettingsFile() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("settings file: %w", err)
	}
	return settingsFile(runtime.GOOS, home, os.Getenv("XDG_CONFIG_HOME")), nil
}

func settingsFile(goos, home, xdgConfig string) string {
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "StartLux", "settings.json")
	}
	if !filepath.IsAbs(xdgConfig) {
		xdgConfig = filepath.Join(home, ".config")
	}
	return filepath.Join(xdgConfig, "startlux", "settings.json")
}

// LoadSettings reads the settings at path; a missing file gives the
// defaults (everything off).
func LoadSettings(path string) (Settings, error) {
	var s Settings
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return Settings{}, fmt.Errorf("settings %s: %w", path, err)
	}
	return s, nil
}

// Save writes the settings to path, replacing the file atomically and
// making its folder when needed.
func (s Settings) Save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600, ""); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}
