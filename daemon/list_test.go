package daemon

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/hub"
)

// dirBytes sums the sizes of the regular files under dir (following a
// symbolic link at the top).
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir+"/", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestListModelsDescribes lists a models folder holding each kind of model
// and checks what the listing says of each against the files themselves.
func TestListModelsDescribes(t *testing.T) {
	td, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	models := t.TempDir()
	link := func(name, target string) {
		if err := os.Symlink(filepath.Join(td, target), filepath.Join(models, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("calibrated", "demo-decision")
	link("mlx", "tiny-qwen35-mlx-4bit")
	link("pointer", "tiny-pointer")
	link(".pulling.pull", "demo-decision") // a pull in progress: hidden
	os.Mkdir(filepath.Join(models, "notes"), 0o755)
	// A pulled model: its files and a provenance record whose sizes count.
	pulled := filepath.Join(models, "pulled")
	os.Mkdir(pulled, 0o755)
	src := hub.Source{Repo: "owner/tiny", Revision: "main", Commit: strings.Repeat("a", 40)}
	for _, n := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		fi, err := os.Stat(filepath.Join(td, "tiny-qwen35", n))
		if err != nil {
			t.Fatal(err)
		}
		os.Symlink(filepath.Join(td, "tiny-qwen35", n), filepath.Join(pulled, n))
		src.Files = append(src.Files, hub.SourceEntry{Name: n, Size: fi.Size()})
	}
	rec, _ := json.Marshal(src)
	os.WriteFile(filepath.Join(pulled, hub.SourceFile), rec, 0o644)
	// A model the engine does not run, with a decision config.
	moe := filepath.Join(models, "moe")
	os.Mkdir(moe, 0o755)
	cfg, _ := os.ReadFile(filepath.Join(td, "tiny-qwen35-moe", "config.json"))
	os.WriteFile(filepath.Join(moe, "config.json"), cfg, 0o644)
	dc, _ := os.ReadFile(filepath.Join(td, "demo-decision", "decision_config.json"))
	os.WriteFile(filepath.Join(moe, "decision_config.json"), dc, 0o644)

	// A chat checkpoint without a tokenizer: nothing to run it with.
	notok := filepath.Join(models, "notok")
	os.Mkdir(notok, 0o755)
	chatCfg, _ := os.ReadFile(filepath.Join(td, "tiny-qwen35", "config.json"))
	os.WriteFile(filepath.Join(notok, "config.json"), chatCfg, 0o644)

	list, err := ListModels(models)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ModelEntry{
		{Name: api.DemoName, Embedded: true, Quant: "bf16", Calibrated: true},
		{Name: "calibrated", Quant: "bf16", Calibrated: true, Bytes: dirBytes(t, filepath.Join(td, "demo-decision"))},
		{Name: "mlx", Quant: "MLX 4-bit (group 32)", Bytes: dirBytes(t, filepath.Join(td, "tiny-qwen35-mlx-4bit"))},
		{Name: "moe", Calibrated: true, Unloadable: "mixture-of-experts"},
		{Name: "notok", Quant: "bf16", Unloadable: "no tokenizer.json"},
		{Name: "pointer", Quant: "bf16", Calibrated: true, Bytes: dirBytes(t, filepath.Join(td, "tiny-pointer"))},
		{Name: "pulled", Quant: "bf16", Source: "owner/tiny", Revision: "main", Commit: src.Commit,
			Bytes: (&src).Bytes()},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %+v", list)
	}
	for i, w := range want {
		g := list[i]
		if g.Name != w.Name || g.Quant != w.Quant || g.Calibrated != w.Calibrated || g.Source != w.Source ||
			g.Revision != w.Revision || g.Commit != w.Commit || !strings.Contains(g.Unloadable, w.Unloadable) ||
			(w.Unloadable == "") != (g.Unloadable == "") || (w.Bytes != 0 && g.Bytes != w.Bytes) || g.Bytes <= 0 {
			t.Errorf("entry %d: %+v\nwant %+v", i, g, w)
		}
	}
}
