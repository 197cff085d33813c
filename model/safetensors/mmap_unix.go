//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapsFiles is true where Open maps files instead of reading them.
const mapsFiles = true

// mapFile maps size bytes of f read-only and returns them with the function
// that unmaps them.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, os.ErrInvalid
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
