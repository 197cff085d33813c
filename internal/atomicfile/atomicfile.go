// Package atomicfile replaces a file so that a reader, or a crash at any
// moment, sees either the old contents or the new, never a mix: the new
// contents go to a temporary file in the same directory, which is synced
// and then renamed over the old one.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ops are the file operations WriteFile uses; tests replace them to fail or
// die at each step.
type ops struct {
	write  func(f *os.File, data []byte) error
	sync   func(f *os.File) error
	rename func(from, to string) error
	link   func(from, to string) error
}

var osOps = ops{
	write: func(f *os.File, data []byte) error {
		_, err := f.Write(data)
		return err
	},
	sync:   func(f *os.File) error { return f.Sync() },
	rename: os.Rename,
	link:   os.Link,
}

// WriteFile replaces the file at path with data (mode perm for a new file,
// the old file's mode otherwise). When backup is not "" and path exists, the
// old contents are kept at backup first (a hard link where the file system
// allows, a synced copy otherwise). On any error path is left as it was.
func WriteFile(path string, data []byte, perm os.FileMode, backup string) error {
	return writeFile(osOps, path, data, perm, backup)
}

func writeFile(o ops, path string, data []byte, perm os.FileMode, backup string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	} else {
		backup = ""
	}
	tmp, err := writeTemp(o, dir, filepath.Base(path), data, perm)
	if err != nil {
		return err
	}
	if backup != "" {
		if err := keepBackup(o, path, backup, perm); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("keep the old %s as %s: %w", filepath.Base(path), filepath.Base(backup), err)
		}
	}
	if err := o.rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return syncDir(dir)
}

// writeTemp writes data to a new synced temporary file in dir and returns
// its path.
func writeTemp(o ops, dir, base string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		err = o.write(f, data)
	}
	if err == nil {
		err = o.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", filepath.Join(dir, base), err)
	}
	return name, nil
}

// keepBackup makes backup hold path's current contents, replacing any
// earlier backup atomically.
func keepBackup(o ops, path, backup string, perm os.FileMode) error {
	dir := filepath.Dir(backup)
	f, err := os.CreateTemp(dir, "."+filepath.Base(backup)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	os.Remove(tmp) // the name is ours; link needs it free
	if err := o.link(path, tmp); err != nil {
		// No hard links here: copy.
		old, rerr := os.Open(path)
		if rerr != nil {
			return rerr
		}
		data, rerr := io.ReadAll(old)
		old.Close()
		if rerr != nil {
			return rerr
		}
		if tmp, err = writeTemp(o, dir, filepath.Base(backup), data, perm); err != nil {
			return err
		}
	}
	if err := o.rename(tmp, backup); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// syncDir makes the directory's entries (the rename) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
