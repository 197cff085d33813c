package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// osVersion returns the OS release: macOS's product version, the kernel
// release elsewhere ("" when unknown).
func osVersion() string {
	if runtime.GOOS == "darwin" {
		if out, err := exec.Command("/usr/bin/sw_vers", "-productVersion").Output(); err == nil {
			return "macOS " + strings.TrimSpace(string(out))
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
}

// Backend is what --backend auto picks here, and why.
type Backend struct {
	Check
	Auto string `json:"auto"`
	Why  string `json:"why"`
}

// checkBackend opens the backend auto picks, which the int8 check and the
// self-check then use (the caller closes it).
func checkBackend() (Backend, tensor.Backend) {
	be, c, err := backends.Auto(0)
	if err != nil {
		return Backend{Check: failed(err)}, nil
	}
	return Backend{Check: ok(), Auto: c.Name, Why: c.Why}, be
}

// closeBackend releases a backend that holds a device.
func closeBackend(be tensor.Backend) {
	if cl, ok := be.(interface{ Close() }); ok {
		cl.Close()
	}
}

// Metal is the GPU as Metal reports it, and the kernel emulator.
type Metal struct {
	Check
	Device                       string   `json:"device"`
	Families                     []string `json:"gpu_families"`
	RecommendedMaxWorkingSetSize uint64   `json:"recommended_max_working_set_size"`
	MaxBufferLength              uint64   `json:"max_buffer_length"`
	UnifiedMemory                bool     `json:"unified_memory"`
	// Library is whether the kernel library compiles on the device.
	Library Check `json:"library"`
	// Emulator is whether the kernels build and run under the emulator
	// (clang-19), which is how they are tested off a Mac.
	Emulator Check `json:"emulator"`
}

func checkMetal(ctx context.Context, opts Options) Metal {
	var m Metal
	info, err := metal.Describe(metal.Options{})
	if err != nil {
		m.Check = failed(errors.Unwrap(err))
		if m.Check.Reason == "" {
			m.Check = failed(err)
		}
		m.Library = failedf("not compiled: %s", m.Check.Reason)
	} else {
		m.Check = ok()
		m.Device, m.Families = info.Name, info.Families
		m.RecommendedMaxWorkingSetSize, m.MaxBufferLength, m.UnifiedMemory = info.RecommendedMaxWorkingSetSize, info.MaxBufferLength, info.UnifiedMemory
		m.Library = ok()
		if info.LibraryErr != "" {
			m.Library = failedf("%s", info.LibraryErr)
			m.Check = failedf("the kernel library does not compile: %s", info.LibraryErr)
		}
	}
	if m.Families == nil {
		m.Families = []string{}
	}
	switch {
	case opts.NoEmulator:
		m.Emulator = failedf("not checked (--no-emulator)")
	default:
		be, err := metal.NewEmulatedContext(ctx, metal.Options{})
		if err != nil {
			m.Emulator = failed(err)
		} else {
			m.Emulator = ok()
			if cl, ok := be.(interface{ Close() }); ok {
				cl.Close()
			}
		}
	}
	return m
}

// sgemmShape is the product the BLAS rate is measured on: m = n = k.
const sgemmShape = 256

// BLAS is the system BLAS the CPU backend loaded and its sgemm rate.
type BLAS struct {
	Check
	// Library is "accelerate", "openblas", "blas" or "none".
	Library string `json:"library"`
	// Shape is the sgemm measured (m×n×k).
	Shape string `json:"sgemm_shape"`
	// GFLOPS is the best rate over the measurement, all cores.
	GFLOPS float64 `json:"sgemm_gflops"`
}

func checkBLAS(ctx context.Context, opts Options) BLAS {
	b := BLAS{Library: "none", Shape: fmt.Sprintf("%d×%d×%d", sgemmShape, sgemmShape, sgemmShape)}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		b.Check = failed(err)
		return b
	}
	b.Check = ok()
	if be.BLAS() != "" {
		b.Library = be.BLAS()
	} else {
		b.Check = failedf("no system BLAS found (set STARTLUX_BLAS to a cblas library); the pure-Go GEMM runs")
	}
	g, err := be.MeasureSgemm(ctx, sgemmShape, sgemmShape, sgemmShape, opts.SgemmTime)
	if err != nil {
		b.Check = failedf("sgemm: %v", err)
		return b
	}
	b.GFLOPS = float64(int(g*10+0.5)) / 10
	return b
}

// Socket is the daemon's socket and its directory.
type Socket struct {
	Check
	Path string `json:"path"`
	Dir  string `json:"dir"`
	// Kind is "default" (the per-user default path), "fallback" (the
	// shared-/tmp fallback, which must be the user's own 0700 directory)
	// or "chosen" (a --socket path, whose directory is used as it is).
	Kind string `json:"kind"`
	// DirExists is false before a daemon first ran (it makes the folder).
	DirExists bool `json:"dir_exists"`
	// DirOwner and DirOwnerUID own the folder (-1: unknown); DirMode is
	// its mode.
	DirOwner    string `json:"dir_owner,omitempty"`
	DirOwnerUID int    `json:"dir_owner_uid"`
	DirMode     string `json:"dir_mode,omitempty"`
	// SocketExists is whether the socket file is there; SocketMode is its
	// mode.
	SocketExists bool   `json:"socket_exists"`
	SocketMode   string `json:"socket_mode,omitempty"`
}

func checkSocket(path string) Socket {
	if path == "" {
		path = ipc.DefaultSocketPath()
	}
	uid := os.Getuid()
	s := Socket{Path: path, Dir: filepath.Dir(path), DirOwnerUID: -1, Kind: "chosen"}
	switch {
	case s.Dir == ipc.FallbackDir(uid):
		s.Kind = "fallback"
	case path == ipc.DefaultSocketPath():
		s.Kind = "default"
	}
	fi, err := os.Lstat(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		s.Check = ok() // the daemon makes it, 0700
		return s
	}
	if err != nil {
		s.Check = failed(err)
		return s
	}
	s.DirExists = true
	s.DirMode = fmt.Sprintf("%04o", fi.Mode().Perm())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.DirOwnerUID = int(st.Uid)
		if u, err := user.LookupId(strconv.Itoa(s.DirOwnerUID)); err == nil {
			s.DirOwner = u.Username
		}
	}
	var sockMode fs.FileMode
	if st, err := os.Lstat(path); err == nil {
		s.SocketExists = true
		sockMode = st.Mode().Perm()
		s.SocketMode = fmt.Sprintf("%04o", sockMode)
	}
	// The daemon's own directories are held to what ipc enforces (the
	// fallback is refused otherwise; the default's mode is set back to
	// 0700 at start); a chosen directory is used as it is.
	own := s.Kind != "chosen"
	switch {
	case own && fi.Mode()&fs.ModeSymlink != 0:
		s.Check = failedf("%s is a symbolic link; the daemon refuses it", s.Dir)
	case fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir():
		s.Check = failedf("%s is not a directory", s.Dir)
	case own && s.DirOwnerUID >= 0 && s.DirOwnerUID != uid:
		s.Check = failedf("%s belongs to uid %d, not to you (uid %d)", s.Dir, s.DirOwnerUID, uid)
	case own && fi.Mode().Perm()&0o077 != 0:
		s.Check = failedf("%s has mode %s, want 0700 (the daemon refuses a fallback directory like this, and sets its default one back to 0700 when it starts)", s.Dir, s.DirMode)
	case s.SocketExists && sockMode&0o077 != 0:
		s.Check = failedf("the socket has mode %s; other users may connect (want 0600)", s.SocketMode)
	default:
		s.Check = ok()
	}
	return s
}

// Daemon is whether a daemon answers on the socket, and its status.
type Daemon struct {
	Check
	Answers bool `json:"answers"`
	// Reported is the daemon's status, as its status method returns it
	// (nil when no daemon answers).
	Reported *api.Status `json:"daemon_status"`
}

func checkDaemon(ctx context.Context, socket string, timeout time.Duration) Daemon {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := ipc.Dial(ctx, socket)
	if err != nil {
		return Daemon{Check: failedf("no daemon answers at %s: %v", socket, err)}
	}
	defer c.Close()
	var st api.Status
	if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
		return Daemon{Check: failedf("the daemon at %s did not give its status: %v", socket, err)}
	}
	d := Daemon{Check: ok(), Answers: true, Reported: &st}
	if st.State == api.StateFailed {
		d.Check = failedf("the daemon runs, but its model failed to load: %s", st.Error)
	}
	return d
}

// Models is the models folder and what each checkpoint in it says.
type Models struct {
	Check
	Dir    string  `json:"dir"`
	Models []Model `json:"models"`
}

// Model is one checkpoint and whether its configuration loads.
type Model struct {
	Check
	Name string `json:"name"`
	Path string `json:"path,omitempty"`
	// Format is the decision config's format (jevfmt/1, pointer/1); a
	// chat checkpoint without one runs as jevfmt/1, zero-shot.
	Format string `json:"format,omitempty"`
	// Uncalibrated is true for a checkpoint without a decision config: it
	// runs zero-shot with a derived config.
	Uncalibrated bool `json:"uncalibrated,omitempty"`
	// Layers, Hidden and Vocab come from its config.json.
	Layers int `json:"layers,omitempty"`
	Hidden int `json:"hidden,omitempty"`
	Vocab  int `json:"vocab,omitempty"`
}

func checkModels(dir string) Models {
	if dir == "" {
		d, err := api.ModelsDir()
		if err != nil {
			return Models{Check: failed(err), Models: []Model{}}
		}
		dir = d
	}
	ms := Models{Check: ok(), Dir: dir}
	ms.Models = append(ms.Models, checkModel("demo (embedded)", "", startlux.DemoModel()))
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		ms.Check = failed(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue // a file or a broken link: not a checkpoint
		}
		m := checkModel(e.Name(), p, os.DirFS(p))
		ms.Models = append(ms.Models, m)
	}
	var bad []string
	for _, m := range ms.Models {
		if m.Status != OK {
			bad = append(bad, m.Name)
		}
	}
	if len(bad) > 0 && ms.Status == OK {
		ms.Check = failedf("%d of %d models do not load their configuration: %s", len(bad), len(ms.Models), strings.Join(bad, ", "))
	}
	return ms
}

// checkModel reads a checkpoint's decision config and the config.json of
// the Qwen3.5 checkpoint it runs.
func checkModel(name, path string, fsys fs.FS) Model {
	m := Model{Name: name, Path: path}
	data, err := fs.ReadFile(fsys, decide.ConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		if _, terr := fs.Stat(fsys, "tokenizer.json"); terr == nil {
			// A chat checkpoint, run zero-shot: its config.json is checked below.
			m.Format, m.Uncalibrated, data = decide.Format, true, nil
			err = nil
		}
	}
	if err != nil {
		m.Check = failedf("no %s (nor a tokenizer.json to run zero-shot): not a checkpoint", decide.ConfigFile)
		return m
	}
	if data != nil {
		m.Format = decide.ConfigFormat(data)
	}
	base := "."
	if m.Uncalibrated {
		// No decision config to parse; the engine derives one at load.
	} else if m.Format == decide.PointerFormat {
		c, err := decide.ParsePointerConfig(data)
		if err != nil {
			m.Check = failed(err)
			return m
		}
		base = c.Base
	} else if _, err := decide.ParseConfig(data); err != nil {
		m.Check = failed(err)
		return m
	}
	var sub fs.FS
	if path != "" {
		sub = os.DirFS(filepath.Join(path, filepath.FromSlash(base)))
	} else if sub, err = fs.Sub(fsys, base); err != nil {
		m.Check = failed(err)
		return m
	}
	cfg, err := model.ReadConfig(sub, filepath.Join(name, base))
	if err != nil {
		m.Check = failed(err)
		return m
	}
	m.Check, m.Layers, m.Hidden, m.Vocab = ok(), cfg.Layers, cfg.Hidden, cfg.Vocab
	return m
}
