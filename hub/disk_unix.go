//go:build unix

package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// freeSpace returns the bytes an unprivileged user may still write on the
// file system holding dir (or its nearest existing ancestor).
func freeSpace(dir string) (int64, error) {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if err == nil {
			return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
		}
		if !errors.Is(err, unix.ENOENT) || filepath.Dir(d) == d {
			return 0, fmt.Errorf("free space of %s: %w", d, err)
		}
	}
}

// lockDir takes an exclusive lock on dir's lock file, or fails at once when
// another process holds it. unlock releases it.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: another pull into it is running: %w", dir, fs.ErrExist)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
