package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// ModelsDir returns the folder the daemon looks for checkpoints in (the
// same rule as the daemon's: ~/Library/Application Support/StartLux/Models
// on macOS, $XDG_DATA_HOME/startlux/models or ~/.local/share/startlux/models
// elsewhere). The app computes it itself so it does not link the engine.
func ModelsDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("models folder: %w", err)
	}
	return modelsDir(runtime.GOOS, home, os.Getenv("XDG_DATA_HOME")), nil
}

func modelsDir(goos, home, xdgData string) string {
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "StartLux", "Models")
	}
	if filepath.IsAbs(xdgData) {
		return filepath.Join(xdgData, "startlux", "models")
	}
	return filepath.Join(home, ".local", "share", "startlux", "models")
}
