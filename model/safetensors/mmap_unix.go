//go:build unix

package safetensors

import (
	"os"
	"unsafe"

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

// release tells the system that the pages wholly inside b, a part of a
// mapping, are not needed now: they leave the process's resident set and
// are read back from the file if touched again.
func release(b []byte) error {
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return nil
	}
	return unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
