package decide

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model/safetensors"
)

// copyPointer copies tiny-pointer to a temporary directory (the base and
// adapter by symbolic link unless replaced), letting edit change the
// decision config and write files.
func copyPointer(t *testing.T, edit func(cfg map[string]any, dir string)) string {
	t.Helper()
	dst := t.TempDir()
	src, err := filepath.Abs(pointerDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"base", "adapter"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "head.safetensors"), readFile(t, filepath.Join(src, "head.safetensors")), 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(src, ConfigFile)), &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg, dst)
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dst, ConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestPointerRefusals checks that bad pointer/1 checkpoints are refused
// with their cause named: the config, the head, and the adapter (whose own
// refusals are tested in package model).
func TestPointerRefusals(t *testing.T) {
	set := func(k string, v any) func(map[string]any, string) {
		return func(cfg map[string]any, _ string) { cfg[k] = v }
	}
	setHead := func(k string, v any) func(map[string]any, string) {
		return func(cfg map[string]any, _ string) { cfg["head"].(map[string]any)[k] = v }
	}
	writeHead := func(width int) func(map[string]any, string) {
		return func(cfg map[string]any, dir string) {
			z := make([]float32, 32*width)
			err := safetensors.WriteFile(filepath.Join(dir, "head.safetensors"), []safetensors.Entry{
				safetensors.F32("q_proj.weight", []int{32, width}, z), safetensors.F32("k_proj.weight", []int{32, width}, z)}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	adapterConfig := func(k string, v any) func(map[string]any, string) {
		return func(cfg map[string]any, dir string) {
			ad := filepath.Join(dir, "adapter")
			src, err := os.Readlink(ad)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(ad)
			if err := os.Mkdir(ad, 0o755); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(readFile(t, filepath.Join(src, "adapter_config.json")), &m); err != nil {
				t.Fatal(err)
			}
			m[k] = v
			b, _ := json.Marshal(m)
			os.WriteFile(filepath.Join(ad, "adapter_config.json"), b, 0o644)
			os.Symlink(filepath.Join(src, "adapter_model.safetensors"), filepath.Join(ad, "adapter_model.safetensors"))
		}
	}
	quantisedBase := func(cfg map[string]any, dir string) {
		src, err := filepath.Abs(filepath.Join(repoTestdata, "tiny-qwen35-mlx-4bit"))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "base"))
		if err := os.Symlink(src, filepath.Join(dir, "base")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		edit func(map[string]any, string)
		want string
	}{
		{"adapter on a quantised base", quantisedBase, "on a quantised base"},
		{"head width", writeHead(48), "tensor q_proj.weight is 48 wide, which does not match the base's hidden size 64"},
		{"head dp", setHead("dp", 16), "tensor q_proj.weight has 32 rows, but head.dp is 16"},
		{"zero temperature", setHead("temperature", 0), "head.temperature = 0"},
		{"no head file", setHead("file", "nothing.safetensors"), "nothing.safetensors"},
		{"escaping base", set("base", "../tiny-qwen35"), `base "../tiny-qwen35": want a slash-separated path inside the checkpoint directory`},
		{"no system", set("system", ""), "system is missing or empty"},
		{"negative lora_scale", set("lora_scale", -1), "lora_scale = -1"},
		{"unknown field", set("letters", "AB"), `unknown field "letters"`},
		{"dora adapter", adapterConfig("use_dora", true), "use_dora: is true"},
		{"adapter with token indices", adapterConfig("trainable_token_indices", []int{3}), "trainable_token_indices: is set"},
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Open(copyPointer(t, tc.edit), be, Options{})
			if err == nil {
				e.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	// The unedited copy opens; without an adapter it answers differently.
	e, err := Open(copyPointer(t, func(map[string]any, string) {}), be, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bare, err := Open(copyPointer(t, func(cfg map[string]any, _ string) { delete(cfg, "adapter"); delete(cfg, "lora_scale") }), be, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	// A quantised (MLX layout) base without an adapter is fine.
	quant, err := Open(copyPointer(t, func(cfg map[string]any, dir string) {
		quantisedBase(cfg, dir)
		delete(cfg, "adapter")
		delete(cfg, "lora_scale")
	}), be, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer quant.Close()
	c := loadPointerCases(t)[0]
	var probs []string
	for _, x := range []*Engine{e, bare, quant} {
		r, err := x.Decide(context.Background(), c.req)
		if err != nil {
			t.Fatal(err)
		}
		probs = append(probs, fmt.Sprint(r.Answers[0].Probs))
	}
	if probs[0] == probs[1] || probs[1] == probs[2] {
		t.Errorf("the adapter or the quantisation changes nothing: %v", probs)
	}
}

// TestPointerBaseInPlace opens a pointer/1 checkpoint whose base is the
// checkpoint directory itself ("base": "."), by directory and through a file
// system, and gets tiny-pointer's answers.
func TestPointerBaseInPlace(t *testing.T) {
	dir := copyPointer(t, func(cfg map[string]any, dir string) { cfg["base"] = "." })
	src, err := filepath.Abs(filepath.Join(pointerDir(), "base"))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := loadPointerCases(t)[2]
	want, err := openPointerEngine(t, pointerDir(), Options{}).Decide(context.Background(), c.req)
	if err != nil {
		t.Fatal(err)
	}
	for _, open := range []func() (*Engine, error){
		func() (*Engine, error) { return Open(dir, be, Options{}) },
		func() (*Engine, error) { return OpenFS(os.DirFS(dir), "in-place", be, Options{}) },
	} {
		e, err := open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Decide(context.Background(), c.req)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		if g, w := answersJSON(t, got), answersJSON(t, want); g != w {
			t.Errorf("got %s, want %s", g, w)
		}
	}
	if !IsCheckpoint(dir) {
		t.Error("IsCheckpoint is false")
	}
}
