//go:build !(darwin && arm64)

package metal

import (
	"fmt"
	"runtime"

	"github.com/startlux/startlux/tensor"
)

// Supported reports, as an error saying why not, whether this build has
// the GPU backend: Metal needs Apple Silicon (darwin/arm64).
func Supported() error {
	if runtime.GOOS != "darwin" {
		return fmt.Errorf("no Metal: not macOS (%s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	return fmt.Errorf("no Metal: Apple Silicon only (%s/%s)", runtime.GOOS, runtime.GOARCH)
}

// New returns the Metal backend on the GPU. Metal needs Apple Silicon
// (darwin/arm64); elsewhere New returns an error.
func New(opts Options) (tensor.Backend, error) {
	return nil, fmt.Errorf("metal: %w; use the cpu backend", Supported())
}

// Describe reports the GPU; off Apple Silicon it returns why there is none.
func Describe(opts Options) (DeviceInfo, error) {
	return DeviceInfo{}, fmt.Errorf("metal: %w", Supported())
}

// RecommendedWorkingSet reports the GPU's recommendedMaxWorkingSetSize; off
// Apple Silicon it returns why there is no GPU.
func RecommendedWorkingSet(opts Options) (uint64, error) {
	return 0, fmt.Errorf("metal: %w", Supported())
}
