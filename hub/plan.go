package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/startlux/startlux/human"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
)

// A File is one file of a repository revision.
type File struct {
	// Name is its path in the repository, slash-separated.
	Name string
	// Size is its length in bytes (-1 when the Hub did not say).
	Size int64
	// LFS is whether it is stored with Git LFS (or xet): its content
	// hash is SHA256.
	LFS bool
	// SHA256 is the content's sha256 (hex) for LFS files.
	SHA256 string
	// GitOID is the git blob id (sha1 hex) of a regular file.
	GitOID string
}

// Plan is what a pull of one revision fetches, decided from the file list
// and the small configuration files before any weights are downloaded.
type Plan struct {
	// Ref is the revision as asked.
	Ref Ref
	// Repo is the repository's id as the Hub names it (it may differ from
	// Ref.Repo in case or after a rename).
	Repo string
	// Commit is the commit the revision resolved to; every file is fetched
	// at it.
	Commit string
	// Files are the files fetched, small ones first.
	Files []File
	// Skipped are the repository's other files, not fetched.
	Skipped []string
	// Format is decision_config.json's format ("jevfmt/1", "pointer/1"),
	// "" when the repository has none (a plain chat checkpoint).
	Format string
	// Model is what the (base) model's config.json says.
	Model model.ConfigInfo
	// ModelDir is the directory holding the model's config.json,
	// tokenizer and weights: "" at the top, or a pointer/1 base.
	ModelDir string

	endpoint string
	small    map[string][]byte // files already fetched and checked by Resolve
}

// Bytes returns the total size of the plan's files (sizes the Hub did not
// give count as 0).
func (p *Plan) Bytes() int64 {
	var n int64
	for _, f := range p.Files {
		n += max(f.Size, 0)
	}
	return n
}

// repoInfo is the part of GET /api/models/{repo}/revision/{rev}?blobs=true
// a pull reads.
type repoInfo struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
		Size      *int64 `json:"size"`
		BlobID    string `json:"blobId"`
		LFS       *struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"lfs"`
	} `json:"siblings"`
}

// maxInfoBytes bounds the repository info read from the API.
const maxInfoBytes = 64 << 20

// maxSmallFile bounds the configuration files Resolve reads into memory.
const maxSmallFile = 64 << 20

// Resolve reads ref's file list, pins it to a commit, reads and checks the
// files that decide whether the checkpoint can run, and returns what a pull
// fetches. It downloads no weights. A repository this engine cannot run is
// refused with an error matching [ErrUnsupported] that says why.
func (c *Client) Resolve(ctx context.Context, ref Ref) (*Plan, error) {
	p, err := c.resolve(ctx, ref)
	return p, c.redact(err)
}

func (c *Client) resolve(ctx context.Context, ref Ref) (*Plan, error) {
	if err := checkRepoID(ref.Repo); err != nil {
		return nil, err
	}
	if ref.Revision == "" {
		ref.Revision = DefaultRevision
	}
	info, err := c.repoInfo(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !isHex(info.SHA, 40) {
		return nil, fmt.Errorf("%s: the Hub gave %q as the revision's commit, not a commit id", ref, info.SHA)
	}
	p := &Plan{Ref: ref, Repo: info.ID, Commit: info.SHA, endpoint: c.Endpoint(), small: map[string][]byte{}}
	if p.Repo == "" {
		p.Repo = ref.Repo
	} else if err := checkRepoID(p.Repo); err != nil {
		return nil, fmt.Errorf("%s: the Hub names the repository %q: %w", ref, p.Repo, err)
	}
	all := map[string]*File{}
	for _, s := range info.Siblings {
		if !fs.ValidPath(s.RFilename) || s.RFilename == "." {
			return nil, fmt.Errorf("%s: the Hub lists a file named %q, which is not a plain relative path", ref, s.RFilename)
		}
		f := File{Name: s.RFilename, Size: -1}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil {
			f.LFS, f.SHA256, f.Size = true, strings.ToLower(s.LFS.SHA256), s.LFS.Size
		} else if isHex(s.BlobID, 40) {
			f.GitOID = strings.ToLower(s.BlobID)
		}
		all[f.Name] = &f
	}
	if err := c.choose(ctx, p, all); err != nil {
		return nil, fmt.Errorf("%s (commit %s): %w", ref, human.Commit(p.Commit), err)
	}
	return p, nil
}

// repoInfo fetches the revision's file list.
func (c *Client) repoInfo(ctx context.Context, ref Ref) (*repoInfo, error) {
	u := c.repoURL("api/models/"+ref.Repo, "revision", url.PathEscape(ref.Revision))
	u.RawQuery = "blobs=true"
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		r, _, err := c.get(ctx, u, nil, nil)
		if err == nil && r.StatusCode == http.StatusOK {
			resp = r
			break
		}
		if err == nil && (!retryable(r.StatusCode) || attempt >= c.retries) {
			return nil, c.explain(ref, httpError(r))
		}
		if err != nil && (ctx.Err() != nil || attempt >= c.retries) {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		if r != nil {
			r.Body.Close()
		}
		if err := sleep(ctx, c.retryWait); err != nil {
			return nil, err
		}
	}
	defer resp.Body.Close()
	var info repoInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxInfoBytes)).Decode(&info); err != nil {
		return nil, fmt.Errorf("%s: reading the repository info from %s: %w", ref, displayURL(u), err)
	}
	return &info, nil
}

// choose fills p.Files from the repository's files: decision_config.json
// first (it says where the model is), then the model's config (refusing an
// architecture the engine does not run), its tokenizer and its weights.
func (c *Client) choose(ctx context.Context, p *Plan, all map[string]*File) error {
	// The files a model directory contributes besides its weights (the
	// config, and what the tokenizer and chat template live in), and those
	// of a PEFT LoRA adapter.
	modelFiles := []string{"config.json", "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "chat_template.jinja", "chat_template.json"}
	adapterFiles := []string{"adapter_config.json", "adapter_model.safetensors"}
	want := map[string]bool{}
	need := func(name string) error {
		if _, ok := all[name]; !ok {
			return fmt.Errorf("no %s in the repository", name)
		}
		want[name] = true
		return nil
	}
	modelDir, adapterDir, head := "", "", ""
	if _, ok := all[decide.ConfigFile]; ok {
		data, err := c.fetchSmall(ctx, p, all[decide.ConfigFile])
		if err != nil {
			return err
		}
		want[decide.ConfigFile] = true
		var f struct {
			Format string `json:"format"`
		}
		json.Unmarshal(data, &f) // a malformed file is reported by its parser
		switch f.Format {
		case decide.PointerFormat:
			pc, err := decide.ParsePointerConfig(data)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrUnsupported, err)
			}
			modelDir, adapterDir, head = cleanDir(pc.Base), cleanDir(pc.Adapter), pc.Head.File
			if pc.Adapter == "" {
				adapterDir = ""
			}
		default:
			if _, err := decide.ParseConfig(data); err != nil {
				return fmt.Errorf("%w: %w", ErrUnsupported, err)
			}
		}
		p.Format = f.Format
	}
	p.ModelDir = strings.TrimSuffix(modelDir, "/")
	cfgName := modelDir + "config.json"
	if _, ok := all[cfgName]; !ok {
		if _, ok := all[adapterDir+"adapter_config.json"]; ok && p.Format == "" {
			return fmt.Errorf("%w: the repository is a LoRA adapter (adapter_config.json) without a base model; StartLux runs adapters only as part of a pointer/1 checkpoint", ErrUnsupported)
		}
		return fmt.Errorf("%w: no %s in the repository", ErrUnsupported, cfgName)
	}
	data, err := c.fetchSmall(ctx, p, all[cfgName])
	if err != nil {
		return err
	}
	want[cfgName] = true
	if p.Model, err = model.ParseConfig(cfgName, data); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if err := need(modelDir + "tokenizer.json"); err != nil {
		return fmt.Errorf("%w: %w (StartLux reads the tokenizer from tokenizer.json)", ErrUnsupported, err)
	}
	for _, n := range modelFiles {
		if _, ok := all[modelDir+n]; ok {
			want[modelDir+n] = true
		}
	}
	if p.Format == "" {
		// Run zero-shot: the chat template must say how the assistant's turn
		// opens (the letters are checked against tokenizer.json at load).
		var fetchErr error
		read := func(name string) ([]byte, error) {
			f, ok := all[modelDir+name]
			if !ok {
				return nil, fs.ErrNotExist
			}
			b, err := c.fetchSmall(ctx, p, f)
			if err != nil {
				fetchErr = err
			}
			return b, err
		}
		if _, err := decide.ChatThinkBlock(read); err != nil {
			if fetchErr != nil {
				return fetchErr
			}
			return fmt.Errorf("%w: no %s, and the one StartLux derives to run it zero-shot needs its chat template: %w", ErrUnsupported, decide.ConfigFile, err)
		}
	}
	if err := c.chooseWeights(ctx, p, all, modelDir, want); err != nil {
		return err
	}
	if adapterDir != "" {
		for _, n := range adapterFiles {
			if err := need(adapterDir + n); err != nil {
				return fmt.Errorf("%w: %w (decision_config.json names the adapter %s)", ErrUnsupported, err, strings.TrimSuffix(adapterDir, "/"))
			}
		}
	}
	if head != "" {
		if err := need(path.Clean(head)); err != nil {
			return fmt.Errorf("%w: %w (decision_config.json names it as the head)", ErrUnsupported, err)
		}
	}
	for name, f := range all {
		if want[name] {
			p.Files = append(p.Files, *f)
		} else {
			p.Skipped = append(p.Skipped, name)
		}
	}
	// Small files first, so that a pull that fails on them fails early.
	sort.Slice(p.Files, func(i, j int) bool {
		a, b := p.Files[i], p.Files[j]
		if a.LFS != b.LFS {
			return !a.LFS
		}
		return a.Name < b.Name
	})
	sort.Strings(p.Skipped)
	return nil
}

// chooseWeights adds the model's safetensors: the shards the index lists,
// or model.safetensors. A repository without them is refused, naming the
// weights it has instead.
func (c *Client) chooseWeights(ctx context.Context, p *Plan, all map[string]*File, dir string, want map[string]bool) error {
	index := dir + "model.safetensors.index.json"
	if f, ok := all[index]; ok {
		data, err := c.fetchSmall(ctx, p, f)
		if err != nil {
			return err
		}
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &ix); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsupported, index, err)
		}
		want[index] = true
		for _, shard := range ix.WeightMap {
			if strings.ContainsAny(shard, `/\`) || shard == ".." || shard == "." || shard == "" {
				return fmt.Errorf("%w: %s: shard name %q is not a plain file name", ErrUnsupported, index, shard)
			}
			if _, ok := all[dir+shard]; !ok {
				return fmt.Errorf("%w: %s lists %s, which is not in the repository", ErrUnsupported, index, shard)
			}
			want[dir+shard] = true
		}
		if len(ix.WeightMap) == 0 {
			return fmt.Errorf("%w: %s: weight_map is empty", ErrUnsupported, index)
		}
		return nil
	}
	if _, ok := all[dir+"model.safetensors"]; ok {
		want[dir+"model.safetensors"] = true
		return nil
	}
	var other []string
	for name := range all {
		if path.Dir(name) == path.Clean("./"+dir) {
			switch ext := path.Ext(name); {
			case ext == ".safetensors":
				other = append(other, name)
			case ext == ".bin" || ext == ".gguf" || ext == ".pt" || ext == ".pth" || ext == ".npz" || ext == ".onnx" || ext == ".h5" || ext == ".msgpack":
				other = append(other, name)
			}
		}
	}
	slices.Sort(other)
	if len(other) == 0 {
		return fmt.Errorf("%w: no safetensors weights (no %smodel.safetensors or model.safetensors.index.json)", ErrUnsupported, dir)
	}
	return fmt.Errorf("%w: no %smodel.safetensors or model.safetensors.index.json; the weights it has (%s) are not ones StartLux reads (it reads only safetensors, sharded through the index)",
		ErrUnsupported, dir, strings.Join(other, ", "))
}

// cleanDir turns a directory named in decision_config.json into a prefix
// of repository paths: "" for the top, else "dir/".
func cleanDir(d string) string {
	d = path.Clean(d)
	if d == "." || d == "" {
		return ""
	}
	return d + "/"
}

// fetchSmall downloads a configuration file into memory, checks it and
// keeps it in p for the download.
func (c *Client) fetchSmall(ctx context.Context, p *Plan, f *File) ([]byte, error) {
	if b, ok := p.small[f.Name]; ok {
		return b, nil
	}
	if f.Size > maxSmallFile {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than a configuration file should be", ErrUnsupported, f.Name, f.Size)
	}
	u := c.repoURL(p.Repo, "resolve", p.Commit, escapeFile(f.Name))
	var data []byte
	for attempt := 0; ; attempt++ {
		resp, _, err := c.get(ctx, u, nil, func(m meta) error { return checkMeta(p, f, m) })
		if errors.Is(err, ErrIntegrity) {
			return nil, err
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			data, err = io.ReadAll(io.LimitReader(resp.Body, maxSmallFile+1))
			resp.Body.Close()
			if err == nil {
				break
			}
			err = fmt.Errorf("GET %s: %w", displayURL(u), err)
		} else if err == nil {
			if !retryable(resp.StatusCode) || attempt >= c.retries {
				return nil, c.explain(Ref{Repo: p.Repo, Revision: p.Commit}, httpError(resp))
			}
			resp.Body.Close()
		}
		if err != nil && (ctx.Err() != nil || attempt >= c.retries) {
			return nil, err
		}
		if err := sleep(ctx, c.retryWait); err != nil {
			return nil, err
		}
	}
	if err := verifyBytes(*f, data); err != nil {
		return nil, err
	}
	p.small[f.Name] = data
	return data, nil
}

// checkMeta reconciles what the file list says about f with what the
// file's own response said, filling in what the list lacked.
func checkMeta(p *Plan, f *File, m meta) error {
	if m.commit != "" && m.commit != p.Commit {
		return fmt.Errorf("%w: %s: the Hub served commit %s, not the one asked for (%s)", ErrIntegrity, f.Name, m.commit, p.Commit)
	}
	if isHex(m.linkedEtag, 64) {
		h := strings.ToLower(m.linkedEtag)
		if f.SHA256 != "" && f.SHA256 != h {
			return fmt.Errorf("%w: %s: the file list gives sha256 %s, the file's X-Linked-Etag %s", ErrIntegrity, f.Name, f.SHA256, h)
		}
		f.LFS, f.SHA256 = true, h
	}
	if !f.LFS && isHex(m.etag, 40) {
		h := strings.ToLower(m.etag)
		if f.GitOID != "" && f.GitOID != h {
			return fmt.Errorf("%w: %s: the file list gives git blob %s, the file's ETag %s", ErrIntegrity, f.Name, f.GitOID, h)
		}
		f.GitOID = h
	}
	if m.linkedSize >= 0 {
		if f.Size >= 0 && f.Size != m.linkedSize {
			return fmt.Errorf("%w: %s: the file list gives %d bytes, the file's X-Linked-Size %d", ErrIntegrity, f.Name, f.Size, m.linkedSize)
		}
		f.Size = m.linkedSize
	}
	return nil
}

// verifyBytes checks a whole file's content against f.
func verifyBytes(f File, data []byte) error {
	if f.Size >= 0 && int64(len(data)) != f.Size {
		return fmt.Errorf("%w: %s: got %d bytes, the Hub says %d", ErrIntegrity, f.Name, len(data), f.Size)
	}
	switch {
	case f.SHA256 != "":
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != f.SHA256 {
			return fmt.Errorf("%w: %s: sha256 is %x, the Hub says %s", ErrIntegrity, f.Name, got, f.SHA256)
		}
	case f.GitOID != "":
		if got := gitOID(data); got != f.GitOID {
			return fmt.Errorf("%w: %s: git blob id is %s, the Hub says %s", ErrIntegrity, f.Name, got, f.GitOID)
		}
	case f.LFS:
		return fmt.Errorf("%w: %s: the Hub gave no sha256 for this LFS file", ErrIntegrity, f.Name)
	}
	return nil
}

// gitOID is git's blob id of data: sha1("blob <len>\x00" + data).
func gitOID(data []byte) string {
	h := newGitHash(int64(len(data)))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// isHex reports whether s is n hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
