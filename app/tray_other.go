//go:build !linux && !darwin

package app

import (
	"context"
	"fmt"
	"runtime"
)

// RunTray reports that this OS has no tray view.
func RunTray(ctx context.Context, ctrl *Controller) error {
	return fmt.Errorf("no tray view for %s", runtime.GOOS)
}
