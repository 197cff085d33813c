//go:build !(darwin && arm64)

package metal

import (
	"fmt"
	"runtime"

	"github.com/startlux/startlux/tensor"
)

// New returns the Metal backend on the GPU. Metal needs Apple Silicon
// (darwin/arm64); elsewhere New returns an error.
func New(opts Options) (tensor.Backend, error) {
	return nil, fmt.Errorf("metal: no Metal on %s/%s (Apple Silicon only); use the cpu backend", runtime.GOOS, runtime.GOARCH)
}
