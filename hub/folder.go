package hub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/startlux/startlux/human"

	"github.com/startlux/startlux/api"
)

// This file is what the pull commands (startlux pull, the daemon's load
// {"pull"}) do with the models folder around a download.

// ErrResumable matches the error of a download that stopped part way and
// left its files in [PartialDir]: pulling the same commit again resumes
// it. A download refused for want of disk space ([ErrNoSpace]) does not
// match, since pulling again would not help.
var ErrResumable = errors.New("hub: the pull can be resumed")

// resumable marks err as matching [ErrResumable]; its message is err's.
type resumable struct{ error }

// Unwrap returns the download's error.
func (r resumable) Unwrap() error { return r.error }

// Is makes r match ErrResumable.
func (r resumable) Is(target error) bool { return target == ErrResumable }

// ExistsError is [Client.Install]'s error when the target directory holds
// something other than the plan's commit: a pull of another repository or
// commit, or a model that was not pulled. It matches [ErrExists].
type ExistsError struct {
	// Dir is the target directory.
	Dir string
	// Source is the provenance record found in Dir (nil when the model
	// there was not pulled).
	Source *Source
}

// Error says what is in the way, and where: "NAME already exists in
// FOLDER (REPO at commit C)".
func (e *ExistsError) Error() string {
	what := "a model that was not pulled"
	if e.Source != nil {
		what = fmt.Sprintf("%s at commit %s", e.Source.Repo, human.Commit(e.Source.Commit))
	}
	return fmt.Sprintf("%s already exists in %s (%s)", filepath.Base(e.Dir), filepath.Dir(e.Dir), what)
}

// Is makes e match ErrExists.
func (e *ExistsError) Is(target error) bool { return target == ErrExists }

// Install puts the plan's checkpoint in dir, a directory of the models
// folder. When dir does not exist it downloads the plan as
// [Client.Download] does and returns the new record with fetched true; an
// error that leaves the files in [PartialDir] matches [ErrResumable]. When
// dir holds a pull of the plan's repository and commit already, Install
// fetches nothing and returns that pull's record with fetched false;
// anything else in dir is an [*ExistsError].
func (c *Client) Install(ctx context.Context, p *Plan, dir string, opts PullOptions) (src *Source, fetched bool, err error) {
	if _, err := os.Lstat(dir); err == nil {
		src, err := ReadSource(dir)
		switch {
		case err != nil:
			return nil, false, &ExistsError{Dir: dir}
		case src.Repo != p.Repo || src.Commit != p.Commit:
			return nil, false, &ExistsError{Dir: dir, Source: src}
		}
		return src, false, nil
	}
	src, err = c.Download(ctx, p, dir, opts)
	if err != nil {
		if _, serr := os.Stat(PartialDir(dir)); serr == nil && !errors.Is(err, ErrNoSpace) {
			err = resumable{err}
		}
		return nil, false, err
	}
	return src, true, nil
}

// Removal is what [Remove] deleted.
type Removal struct {
	// Model is set when the model itself (its directory, or the link that
	// stood for it) was removed.
	Model bool
	// Link is set when the model was a symbolic link, of which only the
	// link was removed; Target is where it pointed.
	Link   bool
	Target string
	// Source is the removed directory's provenance record (nil when the
	// model was not pulled), Bytes the size of its files.
	Source *Source
	Bytes  int64
	// Partial is set when the files an interrupted pull left in
	// [PartialDir] were removed, PartialBytes their size.
	Partial      bool
	PartialBytes int64
}

// Remove deletes the model called name from the models folder and what
// an interrupted pull of it left in [PartialDir]. It refuses the embedded
// demo model's name, a path and the names [CheckName] refuses; inUse, when
// set, is asked before an existing model is removed and refuses with an
// error. A symbolic link is removed, not what it points to. A directory
// that does not look like a model (no config.json, decision_config.json or
// [SourceFile]) is left alone, with an error; so is a partial directory
// that is not a pull's, and a name with nothing to remove. On an error the
// Removal says what was removed before it.
func Remove(folder, name string, inUse func(dir string) error) (Removal, error) {
	var r Removal
	switch {
	case name == api.DemoName:
		return r, fmt.Errorf("%q is the embedded demo model: it is part of the binary and cannot be removed", name)
	case strings.ContainsAny(name, `/\`):
		return r, fmt.Errorf("%q is a path: rm takes the name of a model in %s (\"startlux models\" lists them)", name, folder)
	}
	if err := CheckName(name); err != nil {
		return r, err
	}
	dir := filepath.Join(folder, name)
	fi, err := os.Lstat(dir)
	switch {
	case err == nil:
		if inUse != nil {
			if err := inUse(dir); err != nil {
				return r, err
			}
		}
		if err := r.removeModel(dir, fi); err != nil {
			return r, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return r, err
	}
	_, err = os.Lstat(PartialDir(dir))
	n, rerr := RemovePartial(dir)
	if rerr != nil {
		return r, rerr
	}
	r.Partial, r.PartialBytes = err == nil, n
	if !r.Model && !r.Partial {
		return r, fmt.Errorf("no model %q in %s (\"startlux models\" lists them)", name, folder)
	}
	return r, nil
}

// removeModel deletes the model at dir (fi its Lstat), filling in r.
func (r *Removal) removeModel(dir string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		r.Target, _ = os.Readlink(dir)
		if err := os.Remove(dir); err != nil {
			return err
		}
		r.Model, r.Link = true, true
		return nil
	}
	if !fi.IsDir() || !(exists(filepath.Join(dir, "config.json")) || exists(filepath.Join(dir, "decision_config.json")) ||
		exists(filepath.Join(dir, SourceFile))) {
		return fmt.Errorf("%s does not look like a model (no config.json, decision_config.json or %s); it was left alone", dir, SourceFile)
	}
	src, err := ReadSource(dir)
	if err != nil {
		src = nil
	}
	size := TreeSize(os.DirFS(dir))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	r.Model, r.Source, r.Bytes = true, src, size
	return nil
}

// exists reports whether name exists (without following a final link).
func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}
