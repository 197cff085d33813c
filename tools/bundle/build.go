// Package bundle assembles StartLux.app from Linux or macOS without cgo or
// Apple's tools: it cross-compiles the app and the daemon for darwin/arm64
// and darwin/amd64, merges each pair into a universal Mach-O, signs every
// executable ad hoc (with github.com/anchore/quill), draws the icons, fills
// in Info.plist and lays out the bundle; [Zip] packs it for download.
//
// Off a Mac the bundle is not sealed (no _CodeSignature/CodeResources):
// docs/app.md says how to seal it on a Mac before it is distributed.
package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/startlux/startlux/app/icon"
)

// Names inside the bundle.
const (
	AppName          = "StartLux"
	BundleID         = "dev.startlux.StartLux"
	AppExecutable    = "StartLux" // Contents/MacOS/StartLux, the menu-bar app
	DaemonExecutable = "startlux" // Contents/Helpers/startlux, the daemon and CLI
	AgentLabel       = "dev.startlux.daemon"
	AgentPlist       = AgentLabel + ".plist"
	MenuBarImage     = "MenuBarTemplate" // .png and @2x.png in Contents/Resources
)

// Executable is one program the bundle carries.
//
// The daemon lives in Contents/Helpers, not next to the app in
// Contents/MacOS: macOS file systems are case-insensitive by default, so
// "StartLux" and "startlux" cannot share a folder.
type Executable struct {
	Dir        string // folder in Contents: MacOS or Helpers
	Name       string // file name in Dir
	Package    string // Go package path relative to the module root, e.g. ./cmd/startlux
	Identifier string // code-signing identifier
}

// Executables returns the bundle's programs: the app (CFBundleExecutable)
// and the daemon its LaunchAgent runs.
func Executables() []Executable {
	return []Executable{
		{Dir: "MacOS", Name: AppExecutable, Package: "./cmd/startlux-app", Identifier: BundleID},
		{Dir: "Helpers", Name: DaemonExecutable, Package: "./cmd/startlux", Identifier: "dev.startlux.startlux"},
	}
}

// Arches returns the Go architectures each executable is built for.
func Arches() []string { return []string{"arm64", "amd64"} }

// Signing says how executables are signed.
type Signing int

const (
	// SignNone leaves executables unsigned (a later codesign on a Mac signs
	// them; macOS on Apple silicon refuses to run unsigned arm64 code).
	SignNone Signing = iota
	// SignQuillAdHoc signs each thin slice ad hoc with quill.
	SignQuillAdHoc
	// SignQuillP12 signs each thin slice with the identity in Config.P12.
	SignQuillP12
)

// Config describes one bundle build.
type Config struct {
	// ModuleRoot is the directory holding go.mod, Info.plist and Resources/.
	ModuleRoot string
	// OutDir receives StartLux.app (replaced if present).
	OutDir string
	// Version is CFBundleShortVersionString (e.g. 0.1.0); Build is
	// CFBundleVersion (e.g. a commit count).
	Version, Build string
	// Signing picks how executables are signed; P12 and P12Password name
	// the identity for SignQuillP12.
	Signing     Signing
	P12         string
	P12Password string
	// Log receives the commands run and their output; nil discards it.
	Log io.Writer
}

// Build cross-compiles, merges, signs and assembles OutDir/StartLux.app and
// returns its path.
func Build(ctx context.Context, cfg Config) (string, error) {
	if cfg.ModuleRoot == "" || cfg.OutDir == "" {
		return "", errors.New("bundle: ModuleRoot and OutDir are required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.Log = &lockedWriter{w: cfg.Log} // commands run in parallel
	root, err := filepath.Abs(cfg.ModuleRoot)
	if err != nil {
		return "", fmt.Errorf("bundle: module root: %w", err)
	}
	cfg.ModuleRoot = root
	tmpl, err := os.ReadFile(filepath.Join(root, "Info.plist"))
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	info, err := FillInfoPlist(tmpl, cfg.Version, cfg.Build)
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	agent, err := os.ReadFile(filepath.Join(root, "Resources", AgentPlist))
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	if _, err := ParsePlist(agent); err != nil {
		return "", fmt.Errorf("bundle: %s: %w", AgentPlist, err)
	}

	work, err := os.MkdirTemp("", "startlux-bundle-")
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(work)

	thin, err := crossCompile(ctx, cfg, work)
	if err != nil {
		return "", err
	}
	if cfg.Signing != SignNone {
		// The slices are independent: sign them at once.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, e := range Executables() {
			for _, arch := range Arches() {
				wg.Go(func() {
					if err := quillSign(ctx, cfg, thin[e.Name][arch], e.Identifier); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
	}

	app := filepath.Join(cfg.OutDir, AppName+".app")
	if err := os.RemoveAll(app); err != nil {
		return "", fmt.Errorf("bundle: remove old %s: %w", app, err)
	}
	contents := filepath.Join(app, "Contents")
	files := map[string][]byte{
		"Info.plist": info,
		"PkgInfo":    []byte("APPL????"),
		filepath.Join("Library/LaunchAgents", AgentPlist): agent,
	}
	for _, e := range Executables() {
		var slices [][]byte
		for _, arch := range Arches() {
			b, err := os.ReadFile(thin[e.Name][arch])
			if err != nil {
				return "", fmt.Errorf("bundle: %w", err)
			}
			slices = append(slices, b)
		}
		fat, err := Universal(slices...)
		if err != nil {
			return "", fmt.Errorf("bundle: %s: %w", e.Name, err)
		}
		files[filepath.Join(e.Dir, e.Name)] = fat
	}
	icns, err := AppIconICNS()
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	files["Resources/AppIcon.icns"] = icns
	for scale, size := range map[string]int{"": 18, "@2x": 36} {
		b, err := icon.PNG(icon.Template(size))
		if err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
		files["Resources/"+MenuBarImage+scale+".png"] = b
	}
	if err := checkCaseClash(files); err != nil {
		return "", err
	}
	executable := map[string]bool{}
	for _, e := range Executables() {
		executable[filepath.Join(e.Dir, e.Name)] = true
	}
	for name, data := range files {
		p := filepath.Join(contents, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
		mode := os.FileMode(0o644)
		if executable[name] {
			mode = 0o755
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
	}
	if err := CheckAgent(app); err != nil {
		return "", err
	}
	return app, nil
}

// checkCaseClash refuses two bundle paths that differ only in case: on the
// case-insensitive file systems macOS uses by default one would overwrite
// the other.
func checkCaseClash(files map[string][]byte) error {
	seen := map[string]string{}
	for name := range files {
		k := strings.ToLower(name)
		if other, ok := seen[k]; ok {
			return fmt.Errorf("bundle: %s and %s differ only in case", other, name)
		}
		seen[k] = name
	}
	return nil
}

// crossCompile builds every executable for every architecture (one go build
// per architecture) and returns the paths by name and architecture.
func crossCompile(ctx context.Context, cfg Config, work string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, arch := range Arches() {
		dir := filepath.Join(work, arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
		for _, e := range Executables() {
			args = append(args, e.Package)
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = cfg.ModuleRoot
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
		if err := run(cmd, cfg.Log); err != nil {
			return nil, fmt.Errorf("bundle: build darwin/%s: %w", arch, err)
		}
		for _, e := range Executables() {
			if out[e.Name] == nil {
				out[e.Name] = map[string]string{}
			}
			out[e.Name][arch] = filepath.Join(dir, filepath.Base(e.Package))
		}
	}
	return out, nil
}

// quillSign signs one thin Mach-O in place with the quill go tool.
func quillSign(ctx context.Context, cfg Config, path, identifier string) error {
	args := []string{"tool", "quill", "sign", "--identity", identifier}
	env := os.Environ()
	switch cfg.Signing {
	case SignQuillAdHoc:
		args = append(args, "--ad-hoc")
	case SignQuillP12:
		if cfg.P12 == "" {
			return errors.New("bundle: p12 signing needs a .p12 file")
		}
		args = append(args, "--p12", cfg.P12)
		env = append(env, "QUILL_SIGN_PASSWORD="+cfg.P12Password)
	}
	args = append(args, path)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = cfg.ModuleRoot
	cmd.Env = append(env, "QUILL_LOG_QUIET=true")
	if err := run(cmd, cfg.Log); err != nil {
		return fmt.Errorf("bundle: sign %s: %w", filepath.Base(path), err)
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run runs cmd, copying its output to log and into the error on failure.
func run(cmd *exec.Cmd, log io.Writer) error {
	fmt.Fprintln(log, "+", strings.Join(cmd.Args, " "))
	var out strings.Builder
	cmd.Stdout = io.MultiWriter(log, &out)
	cmd.Stderr = io.MultiWriter(log, &out)
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		return fmt.Errorf("%w\n%s", err, msg)
	}
	return nil
}

// CheckAgent checks that the bundle's LaunchAgent plist names, through
// BundleProgram, an executable file inside the bundle.
func CheckAgent(app string) error {
	p := filepath.Join(app, "Contents/Library/LaunchAgents", AgentPlist)
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	v, err := ParsePlist(data)
	if err != nil {
		return fmt.Errorf("bundle: %s: %w", AgentPlist, err)
	}
	d, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("bundle: %s: root is not a dictionary", AgentPlist)
	}
	prog, _ := d["BundleProgram"].(string)
	if prog == "" || filepath.IsAbs(prog) || strings.Contains(prog, "..") {
		return fmt.Errorf("bundle: %s: BundleProgram %q is not a path inside the bundle", AgentPlist, prog)
	}
	st, err := os.Stat(filepath.Join(app, prog))
	if err != nil {
		return fmt.Errorf("bundle: %s: BundleProgram: %w", AgentPlist, err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("bundle: %s: BundleProgram %s is not an executable file", AgentPlist, prog)
	}
	return nil
}
