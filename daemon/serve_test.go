package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/settings"
)

// TestServeConfigRunOptions resolves serve configurations: the values
// reach the daemon's options, the model is looked up in the models folder,
// a bad model or backend name and a negative idle-unload time fail before
// anything runs, and the idle-unload time is the one given, else the app's
// setting, else the default (a broken settings file is reported, naming
// the fix).
func TestServeConfigRunOptions(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		name     string
		cfg      ServeConfig
		settings string // the settings file's contents ("": none)
		wantIdle time.Duration
		wantErr  string
	}{
		{"defaults", ServeConfig{Backend: "cpu"}, "", DefaultIdleUnload, ""},
		{"every value", ServeConfig{Socket: "/s.sock", Model: "copy", Backend: "cpu", MaxBatch: 3, MaxTokensInFlight: 99,
			PassTokens: 64, Int8: true, IdleUnload: d(2 * time.Hour)}, `{"idle_unload": "5m0s"}`, 2 * time.Hour, ""},
		{"the app's setting", ServeConfig{Backend: "cpu-go"}, `{"idle_unload": "5m0s"}`, 5 * time.Minute, ""},
		{"never, given", ServeConfig{Backend: "cpu", IdleUnload: d(0)}, `{"idle_unload": "5m0s"}`, 0, ""},
		{"never, by the app", ServeConfig{Backend: "cpu"}, `{"idle_unload": "0s"}`, 0, ""},
		{"a setting file without it", ServeConfig{Backend: "cpu"}, `{"int8": true}`, DefaultIdleUnload, ""},
		{"negative", ServeConfig{Backend: "cpu", IdleUnload: d(-time.Second)}, "", 0, "--idle-unload -1s: want a duration, or 0 for never"},
		{"a broken setting", ServeConfig{Backend: "cpu"}, `{"idle_unload": "soon"}`, 0, `idle_unload "soon": want a duration such as 30m, or 0s for never (fix or remove the file; --idle-unload overrides it)`},
		{"a bad setting is not read when given", ServeConfig{Backend: "cpu", IdleUnload: d(time.Minute)}, `{"idle_unload": "soon"}`, time.Minute, ""},
		{"no such model", ServeConfig{Backend: "cpu", Model: "nowhere"}, "", 0, "nowhere"},
		{"no such backend", ServeConfig{Backend: "gpu"}, "", 0, "gpu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
			modelsDir, err := api.ModelsDir()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(modelsDir, 0o755); err != nil {
				t.Fatal(err)
			}
			demo, err := filepath.Abs(filepath.Join("..", "testdata", "demo-decision"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(demo, filepath.Join(modelsDir, "copy")); err != nil {
				t.Fatal(err)
			}
			if c.settings != "" {
				path, err := settings.Path()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(c.settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opts, err := c.cfg.RunOptions()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o := opts.Daemon
			if o.IdleUnload != c.wantIdle {
				t.Errorf("idle unload %v, want %v", o.IdleUnload, c.wantIdle)
			}
			wantModel := ""
			if c.cfg.Model != "" {
				wantModel = filepath.Join(modelsDir, c.cfg.Model)
			}
			if opts.Socket != c.cfg.Socket || o.Model != wantModel || o.ModelsDir != modelsDir || o.MaxBatch != c.cfg.MaxBatch ||
				o.MaxTokensInFlight != c.cfg.MaxTokensInFlight || o.PassTokens != c.cfg.PassTokens || o.Int8 != c.cfg.Int8 {
				t.Errorf("options %+v (socket %q) from %+v, models folder %s", o, opts.Socket, c.cfg, modelsDir)
			}
			if o.Load == nil || o.Estimate == nil || o.Memory == nil {
				t.Fatalf("options without a loader, an estimator or the machine's memory: %+v", o)
			}
			// A CPU backend named explicitly: no GPU working set to hold
			// the model to.
			if m := o.Memory(); m.GPUWorkingSet != 0 || m.Known && m.Total <= 0 {
				t.Errorf("machine memory %+v", m)
			}
		})
	}
}

// TestServeConfigLimits loads the demo model through a configuration's
// loader and estimator: the cache, scratch and request-token limits
// reach the engine and the fit check.
func TestServeConfigLimits(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cfg := ServeConfig{Backend: "cpu", CacheLimit: 1 << 20, ScratchLimit: 1 << 22, MaxRequestTokens: 4096}
	opts, err := cfg.RunOptions()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fp, err := opts.Daemon.Estimate(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if fp.Scratch != cfg.ScratchLimit || fp.Cache != cfg.CacheLimit {
		t.Errorf("footprint %+v, want scratch %d and cache %d", fp, cfg.ScratchLimit, cfg.CacheLimit)
	}
	e, st, err := opts.Daemon.Load(ctx, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.Limits().MaxRequestTokens; got != cfg.MaxRequestTokens {
		t.Errorf("engine limit %d request tokens, want %d", got, cfg.MaxRequestTokens)
	}
	if _, limit := e.CacheStats(); limit != cfg.CacheLimit {
		t.Errorf("cache limit %d, want %d", limit, cfg.CacheLimit)
	}
	if m, ok := e.(memoryReporter); !ok || m.Memory().ScratchLimit != cfg.ScratchLimit {
		t.Errorf("engine memory: scratch limit not %d (%T)", cfg.ScratchLimit, e)
	}
	if !strings.HasPrefix(st.Backend, "cpu") {
		t.Errorf("backend %q, want the CPU backend", st.Backend)
	}
}
