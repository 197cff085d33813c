package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/hub/hubtest"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"

	"github.com/startlux/startlux/cpu"
)

const testdata = "../testdata"

// junk are files a real repository holds next to the checkpoint, none of
// which a pull may fetch.
var junk = map[string][]byte{
	"README.md":              []byte("# a model card\n"),
	".gitattributes":         []byte("*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
	"pytorch_model.bin":      bytes.Repeat([]byte{1}, 3000),
	"model-q4.gguf":          bytes.Repeat([]byte{2}, 3000),
	"preview.png":            {0x89, 'P', 'N', 'G'},
	"generation_config.json": []byte(`{"do_sample": true}`),
	"onnx/model.safetensors": bytes.Repeat([]byte{3}, 100), // another format's folder
}

// repoOf serves a testdata checkpoint as owner/name, with the junk added.
func repoOf(t *testing.T, id, dir string) *hubtest.Repo {
	r := hubtest.Dir(t, id, filepath.Join(testdata, dir))
	for n, b := range junk {
		if _, ok := r.Files[n]; !ok {
			r.Files[n] = b
		}
	}
	return r
}

func newClient(t *testing.T, s *hubtest.Server, o hub.Options) *hub.Client {
	t.Helper()
	o.Endpoint = s.Hub.URL
	if o.RetryWait == 0 {
		o.RetryWait = time.Millisecond
	}
	c, err := hub.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustRef(t *testing.T, s string) hub.Ref {
	t.Helper()
	r, err := hub.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tree lists the regular files under dir by slash path.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newBackend(t *testing.T) tensor.Backend {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestPull pulls each kind of checkpoint StartLux runs and checks that
// exactly the files it uses arrive, byte for byte, with a provenance
// record, and that the result loads.
func TestPull(t *testing.T) {
	cases := []struct {
		dir    string
		want   []string // the files a pull must fetch, as the loaders read them
		format string
		check  func(t *testing.T, dir string)
	}{
		{"tiny-qwen35", []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}, "",
			func(t *testing.T, dir string) {
				m, err := model.Load(dir, newBackend(t), model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				m.Close()
			}},
		{"tiny-qwen35-vl", []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}, "", nil},
		{"tiny-qwen35-mlx-4bit", []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}, "", nil},
		{"demo-decision", []string{"config.json", "decision_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}, decide.Format,
			func(t *testing.T, dir string) {
				e, err := decide.Open(dir, newBackend(t), decide.Options{})
				if err != nil {
					t.Fatal(err)
				}
				e.Close()
			}},
		{"tiny-pointer", []string{"adapter/adapter_config.json", "adapter/adapter_model.safetensors", "base/config.json",
			"base/model.safetensors", "base/tokenizer.json", "base/tokenizer_config.json", "decision_config.json", "head.safetensors"},
			decide.PointerFormat, func(t *testing.T, dir string) {
				if !decide.IsCheckpoint(dir) {
					t.Error("not a checkpoint")
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			repo := repoOf(t, "owner/"+tc.dir, tc.dir)
			s := hubtest.NewServer(t, repo)
			c := newClient(t, s, hub.Options{})
			dest := filepath.Join(t.TempDir(), "models", "m")
			var last hub.Progress
			src, err := c.Pull(context.Background(), mustRef(t, "owner/"+tc.dir), dest, hub.PullOptions{
				Progress: func(p hub.Progress) { last = p },
			})
			if err != nil {
				t.Fatal(err)
			}
			got := tree(t, dest)
			rec, ok := got[hub.SourceFile]
			if !ok {
				t.Fatalf("no %s", hub.SourceFile)
			}
			delete(got, hub.SourceFile)
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tc.want) {
				t.Fatalf("pulled %v, want %v", names, tc.want)
			}
			for n, b := range got {
				if !bytes.Equal(b, repo.Files[n]) {
					t.Errorf("%s differs from the repository's", n)
				}
			}
			if _, err := os.Stat(hub.PartialDir(dest)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("partial directory left behind: %v", err)
			}
			read, err := hub.ReadSource(dest)
			if err != nil {
				t.Fatalf("%v in %s", err, rec)
			}
			if read.Repo != "owner/"+tc.dir || read.Revision != "main" || read.Commit != repo.Commit || read.Format != tc.format ||
				read.Endpoint != s.Hub.URL || len(read.Files) != len(tc.want) || time.Since(read.Pulled) > time.Hour || src.Commit != read.Commit {
				t.Errorf("record %s", rec)
			}
			for _, f := range read.Files {
				data := repo.Files[f.Name]
				if f.Size != int64(len(data)) || (f.SHA256 != "" && f.SHA256 != hubtest.SHA256(data)) || (f.GitOID != "" && f.GitOID != hubtest.GitOID(data)) ||
					(f.SHA256 == "") == (f.GitOID == "") {
					t.Errorf("record of %s: %+v", f.Name, f)
				}
			}
			if !last.Finished || last.Done != last.Total || last.FilesDone != len(tc.want) || last.Total != read.Bytes() {
				t.Errorf("last progress %+v (record says %d bytes)", last, read.Bytes())
			}
			for _, r := range s.Requests() {
				for n := range junk {
					if strings.HasSuffix(r.Path, "/"+n) {
						t.Errorf("fetched %s", r.Path)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, dest)
			}
		})
	}
}

// TestPullRefused checks the repositories a pull refuses, and that each is
// refused before any weights are requested.
func TestPullRefused(t *testing.T) {
	llama := []byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
		"intermediate_size": 128, "vocab_size": 100, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16, "rope_theta": 10000}`)
	cases := []struct {
		name string
		edit func(r *hubtest.Repo)
		want []string
	}{
		{"moe", func(r *hubtest.Repo) { *r = *repoOf(t, r.ID, "tiny-qwen35-moe") }, []string{"mixture-of-experts", "config.json"}},
		{"another family", func(r *hubtest.Repo) { r.Files["config.json"] = llama }, []string{`"llama"`, "dense Qwen3.5"}},
		{"no safetensors", func(r *hubtest.Repo) { delete(r.Files, "model.safetensors") },
			[]string{"pytorch_model.bin", "model-q4.gguf", "only safetensors"}},
		{"no weights at all", func(r *hubtest.Repo) {
			delete(r.Files, "model.safetensors")
			delete(r.Files, "pytorch_model.bin")
			delete(r.Files, "model-q4.gguf")
		}, []string{"no safetensors"}},
		{"shards without index", func(r *hubtest.Repo) {
			r.Files["model-00001-of-00002.safetensors"] = r.Files["model.safetensors"]
			delete(r.Files, "model.safetensors")
		}, []string{"model-00001-of-00002.safetensors", "index"}},
		{"index names a missing shard", func(r *hubtest.Repo) {
			r.Files["model.safetensors.index.json"] = []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors"}}`)
		}, []string{"model-00001-of-00002.safetensors", "not in the repository"}},
		{"no tokenizer.json", func(r *hubtest.Repo) { delete(r.Files, "tokenizer.json") }, []string{"tokenizer.json"}},
		{"bad decision config", func(r *hubtest.Repo) { r.Files["decision_config.json"] = []byte(`{"format": "jevfmt/9"}`) },
			[]string{"decision_config.json", "jevfmt/9"}},
		{"thinking-only chat template", func(r *hubtest.Repo) {
			r.Files["tokenizer_config.json"] = []byte(`{"chat_template": "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"}`)
		}, []string{"no decision_config.json", "tokenizer_config.json", "thinking-only"}},
		{"no chat template", func(r *hubtest.Repo) { delete(r.Files, "tokenizer_config.json") }, []string{"no chat template"}},
		{"adapter only", func(r *hubtest.Repo) {
			*r = *repoOf(t, r.ID, "tiny-qwen35-lora")
		}, []string{"LoRA adapter", "without a base model"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := repoOf(t, "owner/x", "tiny-qwen35")
			tc.edit(repo)
			s := hubtest.NewServer(t, repo)
			c := newClient(t, s, hub.Options{})
			dest := filepath.Join(t.TempDir(), "m")
			_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
			if !errors.Is(err, hub.ErrUnsupported) {
				t.Fatalf("error %v, want one matching ErrUnsupported", err)
			}
			for _, w := range append(tc.want, "owner/x") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, r := range s.Requests() {
				if r.Storage || strings.HasSuffix(r.Path, ".safetensors") || strings.HasSuffix(r.Path, ".bin") {
					t.Errorf("requested %s before refusing", r.Path)
				}
			}
			if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("target exists after a refusal")
			}
		})
	}
}

// TestPullAuth checks the token: sent to the Hub, never to the storage host
// it redirects to, asked for when missing, and never in an error.
func TestPullAuth(t *testing.T) {
	const token = "hf_secretsecretsecret"
	cases := []struct {
		name  string
		gated bool
		token string
		want  []string // "" for success
		is    error
	}{
		{"private with token", false, token, nil, nil},
		{"private without token", false, "", []string{"401", "HF_TOKEN", "private"}, hub.ErrUnauthorized},
		{"private with a wrong token", false, "hf_wrongwrongwrong", []string{"401", "refused HF_TOKEN"}, hub.ErrUnauthorized},
		{"gated with token", true, token, nil, nil},
		{"gated without token", true, "", []string{"gated", "accept its conditions", "HF_TOKEN"}, hub.ErrUnauthorized},
		{"gated with a wrong token", true, "hf_wrongwrongwrong", []string{"gated", "403", "not been granted"}, hub.ErrUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := repoOf(t, "owner/x", "tiny-qwen35")
			repo.Token, repo.Gated = token, tc.gated
			s := hubtest.NewServer(t, repo)
			s.EchoAuthorization()
			var reports []hub.Progress
			c := newClient(t, s, hub.Options{Token: tc.token})
			_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{
				Progress: func(p hub.Progress) { reports = append(reports, p) },
			})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if !errors.Is(err, tc.is) {
					t.Fatalf("error %v, want one matching %v", err, tc.is)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if tc.token != "" && strings.Contains(err.Error(), tc.token) {
					t.Errorf("error %q contains the token", err)
				}
			}
			for _, p := range reports {
				if tc.token != "" && strings.Contains(strings.Join([]string{p.File, p.Repo, p.Commit}, " "), tc.token) {
					t.Errorf("progress %+v contains the token", p)
				}
			}
			storage := 0
			for _, r := range s.Requests() {
				if r.Storage {
					storage++
					if r.Auth != "" {
						t.Errorf("the storage host got Authorization %q", r.Auth)
					}
				} else if r.Auth != bearer(tc.token) {
					t.Errorf("the Hub got Authorization %q for %s, want %q", r.Auth, r.Path, bearer(tc.token))
				}
			}
			if tc.want == nil && storage == 0 {
				t.Error("no LFS download went to the storage host")
			}
		})
	}
}

func bearer(tok string) string {
	if tok == "" {
		return ""
	}
	return "Bearer " + tok
}
