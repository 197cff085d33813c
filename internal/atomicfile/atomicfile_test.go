package atomicfile

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var (
	oldData = bytes.Repeat([]byte(`{"old": true}`+"\n"), 200)
	newData = bytes.Repeat([]byte(`{"new": 1}`+"\n"), 300)
)

func setup(t *testing.T) (dir, path, bak string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "decision_config.json")
	if err := os.WriteFile(path, oldData, 0o640); err != nil {
		t.Fatal(err)
	}
	return dir, path, path + ".bak"
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	dir, path, bak := setup(t)
	if err := WriteFile(path, newData, 0o600, bak); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	old, _ := os.ReadFile(bak)
	if !bytes.Equal(got, newData) || !bytes.Equal(old, oldData) {
		t.Errorf("after the write: file %d bytes, backup %d bytes", len(got), len(old))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the old file's 0640", fi.Mode().Perm())
	}
	if names := entries(t, dir); len(names) != 2 {
		t.Errorf("left in the directory: %v", names)
	}
	// A second write replaces the backup with the contents it replaced.
	if err := WriteFile(path, oldData, 0o600, bak); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(bak); !bytes.Equal(b, newData) {
		t.Errorf("the second backup holds %d bytes, want the first write's", len(b))
	}
	// A new file: no backup.
	fresh := filepath.Join(dir, "new.json")
	if err := WriteFile(fresh, newData, 0o600, fresh+".bak"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh + ".bak"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a backup of a file that did not exist: %v", err)
	}
}

// TestWriteFileFaults fails each step in turn: the file keeps its old
// contents, the error says so, and no temporary file is left behind.
func TestWriteFileFaults(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		edit func(o *ops)
	}{
		{"write", func(o *ops) {
			o.write = func(f *os.File, data []byte) error {
				f.Write(data[:len(data)/2])
				return boom
			}
		}},
		{"sync", func(o *ops) { o.sync = func(*os.File) error { return boom } }},
		{"rename", func(o *ops) {
			o.rename = func(from, to string) error {
				if strings.HasSuffix(to, ".bak") {
					return os.Rename(from, to)
				}
				return boom
			}
		}},
		{"backup rename", func(o *ops) {
			o.rename = func(from, to string) error {
				if strings.HasSuffix(to, ".bak") {
					return boom
				}
				return os.Rename(from, to)
			}
		}},
		{"backup without links, write fails", func(o *ops) {
			o.link = func(string, string) error { return boom }
			o.write = func(f *os.File, data []byte) error {
				if strings.Contains(f.Name(), ".bak") {
					return boom
				}
				_, err := f.Write(data)
				return err
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, path, bak := setup(t)
			o := osOps
			tc.edit(&o)
			err := writeFile(o, path, newData, 0o600, bak)
			if !errors.Is(err, boom) {
				t.Fatalf("got %v, want the fault", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, oldData) {
				t.Errorf("the file has %d bytes, not the old contents", len(got))
			}
			for _, n := range entries(t, dir) {
				if strings.Contains(n, ".tmp-") {
					t.Errorf("left behind: %s", n)
				}
			}
		})
	}
	// Without hard links the backup is a copy.
	_, path, bak := setup(t)
	o := osOps
	o.link = func(string, string) error { return boom }
	if err := writeFile(o, path, newData, 0o600, bak); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(bak); !bytes.Equal(b, oldData) {
		t.Errorf("copied backup: %d bytes", len(b))
	}
}

// TestWriteFileKilled kills a process in the middle of writing (half the
// bytes written), after the sync and after the rename: the file holds the
// old contents, the old, and the new, never a mix.
func TestWriteFileKilled(t *testing.T) {
	for _, tc := range []struct {
		at   string
		want []byte
	}{{"write", oldData}, {"sync", oldData}, {"rename", newData}} {
		t.Run(tc.at, func(t *testing.T) {
			_, path, _ := setup(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHelper$")
			cmd.Env = append(os.Environ(), "ATOMICFILE_KILL_AT="+tc.at, "ATOMICFILE_PATH="+path)
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the helper was not killed: %v", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, tc.want) {
				t.Errorf("killed at %s: the file has %d bytes, want %d", tc.at, len(got), len(tc.want))
			}
		})
	}
}

// TestKilledHelper runs in the child of TestWriteFileKilled and kills
// itself at the step it is told.
func TestKilledHelper(t *testing.T) {
	at, path := os.Getenv("ATOMICFILE_KILL_AT"), os.Getenv("ATOMICFILE_PATH")
	if at == "" {
		t.Skip("only a helper of TestWriteFileKilled")
	}
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	o := osOps
	switch at {
	case "write":
		o.write = func(f *os.File, data []byte) error {
			f.Write(data[:len(data)/2])
			f.Sync()
			die()
			return nil
		}
	case "sync":
		o.sync = func(f *os.File) error {
			f.Sync()
			die()
			return nil
		}
	case "rename":
		o.rename = func(from, to string) error {
			err := os.Rename(from, to)
			if !strings.HasSuffix(to, ".bak") {
				die()
			}
			return err
		}
	}
	writeFile(o, path, newData, 0o600, path+".bak")
	t.Fatal("not killed")
}
