package hub

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// SourceFile is the name of the provenance record in a pulled model's
// directory.
const SourceFile = "startlux-source.json"

// Source is the provenance record of a pulled model: where it came from and
// what was fetched.
type Source struct {
	// Endpoint is the Hub it was pulled from.
	Endpoint string `json:"endpoint"`
	// Repo is the repository's id as the Hub names it.
	Repo string `json:"repo"`
	// Revision is the revision asked for (a branch, tag or commit), Commit
	// the commit it resolved to.
	Revision string `json:"revision"`
	Commit   string `json:"commit"`
	// Format is decision_config.json's format, "" when the repository has
	// none.
	Format string `json:"format,omitempty"`
	// Pulled is when the pull completed (UTC).
	Pulled time.Time `json:"pulled"`
	// Files are the files fetched, with their sizes and hashes.
	Files []SourceEntry `json:"files"`
}

// SourceEntry is one fetched file: its path in the repository, its size,
// and the hash it was checked against (sha256 for LFS files, the git blob
// id for the others; neither when the Hub gave none).
type SourceEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	GitOID string `json:"git_oid,omitempty"`
}

// Bytes returns the total size of the fetched files.
func (s *Source) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

// ReadSource reads the provenance record in dir; an error matching
// fs.ErrNotExist means the model was not pulled.
func ReadSource(dir string) (*Source, error) {
	return ReadSourceFS(os.DirFS(dir), dir)
}

// ReadSourceFS reads the provenance record at the root of fsys; name is shown
// in errors.
func ReadSourceFS(fsys fs.FS, name string) (*Source, error) {
	data, err := fs.ReadFile(fsys, SourceFile)
	if err != nil {
		return nil, err
	}
	var s Source
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(name, SourceFile), err)
	}
	if s.Repo == "" || s.Commit == "" {
		return nil, fmt.Errorf("%s: no repo or commit", filepath.Join(name, SourceFile))
	}
	return &s, nil
}

// source builds the record of a completed pull of p.
func (p *Plan) source(pulled time.Time) *Source {
	s := &Source{Endpoint: p.endpoint, Repo: p.Repo, Revision: p.Ref.Revision, Commit: p.Commit,
		Format: p.Format, Pulled: pulled.UTC().Truncate(time.Second)}
	for _, f := range p.Files {
		s.Files = append(s.Files, SourceEntry{Name: f.Name, Size: f.Size, SHA256: f.SHA256, GitOID: f.GitOID})
	}
	return s
}

// TreeSize returns the total size of the regular files in fsys (a model
// directory through os.DirFS, or an embedded one).
func TreeSize(fsys fs.FS) int64 {
	var n int64
	fs.WalkDir(fsys, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
