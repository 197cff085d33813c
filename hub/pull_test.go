package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"net/http"
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

// partialAfterCut runs a pull whose weights transfer breaks off after n
// bytes, with retries off, and returns the target it failed to fill.
func partialAfterCut(t *testing.T, s *hubtest.Server, n int64) string {
	t.Helper()
	s.CutAfter("model.safetensors", n)
	c := newClient(t, s, hub.Options{Retries: -1})
	dest := filepath.Join(t.TempDir(), "m")
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{}); err == nil {
		t.Fatal("the cut pull succeeded")
	} else if !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("error %q does not name the file", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target exists after a failed pull")
	}
	part := filepath.Join(hub.PartialDir(dest), "model.safetensors.part")
	if fi, err := os.Stat(part); err != nil || fi.Size() != n {
		t.Fatalf("part after the cut: %v, %v; want %d bytes", fi, err, n)
	}
	return dest
}

// TestPullResume interrupts a transfer and resumes it in a second pull,
// which must ask for the rest with a Range request, get 206, and end with
// the right file; and a server that ignores the Range still gives the right
// file.
func TestPullResume(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		name := map[bool]string{false: "range", true: "range ignored"}[ignore]
		t.Run(name, func(t *testing.T) {
			repo := repoOf(t, "owner/x", "tiny-qwen35")
			s := hubtest.NewServer(t, repo)
			const cut = 100_000
			dest := partialAfterCut(t, s, cut)
			if ignore {
				s.IgnoreRange("model.safetensors")
			}
			before := len(s.Requests())
			var first, last hub.Progress
			c := newClient(t, s, hub.Options{Retries: -1})
			_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{Progress: func(p hub.Progress) {
				if first.Total == 0 {
					first = p
				}
				last = p
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) {
				t.Fatal("resumed file differs")
			}
			var storage []hubtest.Request
			for _, r := range s.Requests()[before:] {
				if r.Storage {
					storage = append(storage, r)
				}
				if !r.Storage && (strings.HasSuffix(r.Path, "/config.json") || strings.HasSuffix(r.Path, "/tokenizer.json")) {
					// config.json is read again to check the plan; the
					// tokenizer was complete and must not be fetched again.
					if strings.HasSuffix(r.Path, "/tokenizer.json") {
						t.Errorf("fetched the complete %s again", r.Path)
					}
				}
			}
			wantStatus := http.StatusPartialContent
			if ignore {
				wantStatus = http.StatusOK
			}
			if len(storage) != 1 || storage[0].Range != "bytes=100000-" || storage[0].Status != wantStatus {
				t.Fatalf("storage requests %+v, want one for bytes=100000- answered %d", storage, wantStatus)
			}
			smallBytes := int64(0)
			for _, n := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
				smallBytes += int64(len(repo.Files[n]))
			}
			if first.Resumed != cut+smallBytes || !last.Finished || last.Done != last.Total {
				t.Errorf("progress: first %+v last %+v; want %d bytes resumed", first, last, cut+smallBytes)
			}
		})
	}
}

// TestPullRetries breaks a transfer off twice within one pull: it must
// resume each time from where it stopped.
func TestPullRetries(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	s.CutAfter("model.safetensors", 5000, 7000)
	s.FailNext("/api/models/owner/x/revision/main", http.StatusServiceUnavailable)
	c := newClient(t, s, hub.Options{})
	dest := filepath.Join(t.TempDir(), "m")
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) {
		t.Fatal("file differs")
	}
	var ranges []string
	for _, r := range s.Requests() {
		if r.Storage {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"", "bytes=5000-", "bytes=12000-"}; !slices.Equal(ranges, want) {
		t.Errorf("ranges asked %q, want %q", ranges, want)
	}
	// With retries off, the same faults end the pull.
	s.CutAfter("model.safetensors", 10)
	c = newClient(t, s, hub.Options{Retries: -1})
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{}); err == nil {
		t.Error("a cut transfer without retries succeeded")
	}
}

// TestPullIntegrity serves wrong hashes: a file that does not match the
// Hub's sha256 is deleted and the pull fails; a Hub that contradicts itself
// is refused before the download.
func TestPullIntegrity(t *testing.T) {
	t.Run("content", func(t *testing.T) {
		s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
		s.WrongSHA256("model.safetensors")
		c := newClient(t, s, hub.Options{})
		dest := filepath.Join(t.TempDir(), "m")
		_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "model.safetensors: sha256 is") {
			t.Fatalf("error %v, want a sha256 mismatch of model.safetensors", err)
		}
		if _, err := os.Stat(filepath.Join(hub.PartialDir(dest), "model.safetensors.part")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the bad part was kept: %v", err)
		}
		if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("target exists")
		}
	})
	t.Run("contradiction", func(t *testing.T) {
		s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
		s.HeaderSHA256("model.safetensors", strings.Repeat("ab", 32))
		c := newClient(t, s, hub.Options{})
		_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "X-Linked-Etag") {
			t.Fatalf("error %v, want the two hashes named", err)
		}
		for _, r := range s.Requests() {
			if r.Storage {
				t.Errorf("downloaded %s anyway", r.Path)
			}
		}
	})
	t.Run("regular file", func(t *testing.T) {
		repo := repoOf(t, "owner/x", "tiny-qwen35")
		// tokenizer.json as a regular (non-LFS) file is checked by its
		// git blob id: serve one that differs from the listed id by
		// changing the content after the listing.
		s := hubtest.NewServer(t, repo)
		c := newClient(t, s, hub.Options{})
		p, err := c.Resolve(context.Background(), mustRef(t, "owner/x"))
		if err != nil {
			t.Fatal(err)
		}
		repo.Files["tokenizer.json"] = append([]byte(nil), repo.Files["tokenizer.json"]...)
		repo.Files["tokenizer.json"][10] ^= 1
		_, err = c.Download(context.Background(), p, filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "tokenizer.json") {
			t.Fatalf("error %v, want a mismatch of tokenizer.json", err)
		}
	})
}

// TestPullRevisions pulls by branch, tag and commit, follows a renamed
// repository, and refuses an unknown revision.
func TestPullRevisions(t *testing.T) {
	repo := repoOf(t, "owner/new", "tiny-qwen35")
	repo.Revisions = []string{"main", "v1.0", "refs/pr/1"}
	s := hubtest.NewServer(t, repo)
	s.Rename("owner/old", "owner/new")
	for _, ref := range []string{"owner/new", "owner/new@v1.0", "owner/new@refs/pr/1", "owner/new@" + repo.Commit, "owner/old@main"} {
		t.Run(ref, func(t *testing.T) {
			c := newClient(t, s, hub.Options{})
			r := mustRef(t, ref)
			src, err := c.Pull(context.Background(), r, filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if src.Repo != "owner/new" || src.Revision != r.Revision || src.Commit != repo.Commit {
				t.Errorf("record %+v", src)
			}
		})
	}
	// The renamed repository's file list was asked for with its query.
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Path, "/api/models/owner/new/") && r.Query != "blobs=true" {
			t.Errorf("%s asked with query %q", r.Path, r.Query)
		}
	}
	c := newClient(t, s, hub.Options{})
	_, err := c.Pull(context.Background(), mustRef(t, "owner/new@nope"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
	if !errors.Is(err, hub.ErrNotFound) || !strings.Contains(err.Error(), "no such revision") {
		t.Errorf("unknown revision: %v", err)
	}
	_, err = c.Pull(context.Background(), mustRef(t, "owner/none"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
	if !errors.Is(err, hub.ErrUnauthorized) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("unknown repository: %v", err)
	}
}

// TestPullDiskSpace checks the free-space refusal against injected figures:
// the pull needs what is still to fetch plus the margin.
func TestPullDiskSpace(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	c := newClient(t, s, hub.Options{})
	p, err := c.Resolve(context.Background(), mustRef(t, "owner/x"))
	if err != nil {
		t.Fatal(err)
	}
	need := p.Bytes() + hub.SpaceMargin
	for _, tc := range []struct {
		free int64
		ok   bool
	}{{need - 1, false}, {need, true}, {0, false}, {-1, true}} {
		dest := filepath.Join(t.TempDir(), "m")
		var asked string
		before := len(s.Requests())
		_, err := c.Download(context.Background(), p, dest, hub.PullOptions{FreeSpace: func(dir string) (int64, error) {
			asked = dir
			return tc.free, nil
		}})
		if asked != filepath.Dir(dest) {
			t.Errorf("free space asked of %q, want the models folder %q", asked, filepath.Dir(dest))
		}
		if tc.ok != (err == nil) {
			t.Errorf("free %d (need %d): error %v", tc.free, need, err)
		}
		if !tc.ok {
			if !errors.Is(err, hub.ErrNoSpace) || !strings.Contains(err.Error(), hub.FormatBytes(tc.free)+" are free") {
				t.Errorf("error %v", err)
			}
			if n := len(s.Requests()); n != before {
				t.Errorf("%d requests before refusing", n-before)
			}
		}
	}
	// After an interrupted pull only the rest is needed.
	dest := partialAfterCut(t, s, 200_000)
	_, err = c.Download(context.Background(), p, dest, hub.PullOptions{FreeSpace: func(string) (int64, error) {
		return need - 200_000 - int64(len(repo.Files["config.json"])+len(repo.Files["tokenizer.json"])+len(repo.Files["tokenizer_config.json"])), nil
	}})
	if err != nil {
		t.Errorf("resuming with just enough space for the rest: %v", err)
	}
}

// TestPullTargetExists refuses to overwrite a model.
func TestPullTargetExists(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	c := newClient(t, s, hub.Options{})
	dest := filepath.Join(t.TempDir(), "m")
	os.Mkdir(dest, 0o755)
	_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
	if !errors.Is(err, hub.ErrExists) {
		t.Errorf("error %v, want ErrExists", err)
	}
}

// TestPullLeftoversOfAnotherCommit discards what an interrupted pull of an
// older commit left.
func TestPullLeftoversOfAnotherCommit(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	dest := partialAfterCut(t, s, 1000)
	repo.Commit = strings.Repeat("c", 40)
	repo.Files["model.safetensors"] = append(bytes.Repeat([]byte{7}, 1000), repo.Files["model.safetensors"][1000:]...)
	c := newClient(t, s, hub.Options{})
	src, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) || src.Commit != repo.Commit {
		t.Error("the new commit's file was not fetched whole")
	}
}

// TestPullCancel stops a pull through its context.
func TestPullCancel(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	c := newClient(t, s, hub.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Pull(ctx, mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{Progress: func(p hub.Progress) {
		if p.File == "model.safetensors" {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestRemovePartial deletes an interrupted pull's files, and only those.
func TestRemovePartial(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	dest := partialAfterCut(t, s, 1234)
	n, err := hub.RemovePartial(dest)
	if err != nil || n < 1234 {
		t.Errorf("RemovePartial = %d, %v", n, err)
	}
	if _, err := os.Stat(hub.PartialDir(dest)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("partial directory still there: %v", err)
	}
	if n, err := hub.RemovePartial(dest); n != 0 || err != nil {
		t.Errorf("again: %d, %v", n, err)
	}
	other := filepath.Join(t.TempDir(), "y")
	os.Mkdir(hub.PartialDir(other), 0o755)
	if _, err := hub.RemovePartial(other); err == nil {
		t.Error("removed a directory that is not a pull's")
	}
}
