//go:build !unix

package safetensors

import (
	"io"
	"os"
)

// mapsFiles is true where Open maps files instead of reading them.
const mapsFiles = false

// mapFile reads the file into memory where mmap is not available.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}

// release does nothing where files are read rather than mapped.
func release([]byte) error { return nil }
