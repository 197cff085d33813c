package hub

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/startlux/startlux/api"
)

// DefaultRevision is the revision pulled when none is given.
const DefaultRevision = "main"

// Ref names a revision of a model repository on the Hub.
type Ref struct {
	// Repo is the repository id, "owner/name" (or a bare legacy "name").
	Repo string
	// Revision is a branch, a tag or a commit id.
	Revision string
}

// ParseRef parses "REPO[@REVISION]" (revision [DefaultRevision] when
// absent), checking the repository id as the Hub does.
func ParseRef(s string) (Ref, error) {
	repo, rev, hasRev := strings.Cut(s, "@")
	if hasRev && rev == "" {
		return Ref{}, fmt.Errorf("%q: empty revision after @", s)
	}
	if !hasRev {
		rev = DefaultRevision
	}
	if err := checkRepoID(repo); err != nil {
		return Ref{}, err
	}
	for _, r := range rev {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return Ref{}, fmt.Errorf("revision %q: contains a space or control character", rev)
		}
	}
	return Ref{Repo: repo, Revision: rev}, nil
}

// String writes r as ParseRef reads it.
func (r Ref) String() string { return r.Repo + "@" + r.Revision }

// DefaultName is the name a pull of r gets in the models folder when none
// is given: the repository's name without its owner.
func (r Ref) DefaultName() string {
	return r.Repo[strings.LastIndexByte(r.Repo, '/')+1:]
}

// Dir returns the directory a pull of r goes to in the models folder
// folder: the model's name is name, or [Ref.DefaultName] when name is "",
// checked with [CheckName].
func (r Ref) Dir(folder, name string) (string, error) {
	if name == "" {
		name = r.DefaultName()
	}
	if err := CheckName(name); err != nil {
		return "", err
	}
	return filepath.Join(folder, name), nil
}

// ErrDemoName matches [CheckName]'s error for the embedded demo model's
// name ([api.DemoName]).
var ErrDemoName = errors.New("the embedded demo model's name")

// checkRepoID applies the Hub's rules for repository ids: one or two
// segments of letters, digits, '-', '_' and '.', the name at most 96
// characters, no "--" or "..", no segment starting or ending with '-' or
// '.', no ".git" suffix.
func checkRepoID(id string) error {
	bad := func(why string) error {
		return fmt.Errorf("repository %q: %s (want owner/name, e.g. Qwen/Qwen3.5-0.8B)", id, why)
	}
	if id == "" {
		return bad("empty")
	}
	if strings.Contains(id, "://") {
		return bad("a URL, not a repository id")
	}
	segs := strings.Split(id, "/")
	if len(segs) > 2 {
		return bad("more than one '/'")
	}
	if strings.Contains(id, "--") || strings.Contains(id, "..") {
		return bad(`contains "--" or ".."`)
	}
	if strings.HasSuffix(id, ".git") {
		return bad(`ends in ".git"`)
	}
	for _, s := range segs {
		if s == "" {
			return bad("an empty segment")
		}
		if len(s) > 96 {
			return bad("a segment longer than 96 characters")
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				return bad(fmt.Sprintf("character %q is not allowed", r))
			}
		}
		if strings.ContainsAny(s[:1], "-.") || strings.ContainsAny(s[len(s)-1:], "-.") {
			return bad("a segment starts or ends with '-' or '.'")
		}
	}
	return nil
}

// CheckName reports why name cannot be a model's directory in the models
// folder (nil when it can): it must be one plain path element, not hidden
// (names starting with '.' are the pulls in progress), at most 255 bytes,
// free of control characters, and not [api.DemoName], under which the
// embedded demo model is listed.
func CheckName(name string) error {
	switch {
	case name == api.DemoName:
		return fmt.Errorf("%q is %w", name, ErrDemoName)
	case name == "":
		return fmt.Errorf("model name is empty")
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("model name %q: contains a path separator", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("model name %q: starts with '.'", name)
	case len(name) > 255:
		return fmt.Errorf("model name %q: longer than 255 bytes", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("model name %q: contains a control character", name)
		}
	}
	return nil
}
