package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/model"
)

// ListModels returns the embedded demo followed by the models found
// directly inside dir, by name: the checkpoints, and the directories that
// hold a config.json but are no checkpoint (listed as unloadable, saying
// why). A model without a decision config is listed uncalibrated. Names
// starting with '.' (pulls in progress) are skipped.
// Each entry says where the model came from, its size, how its weights are
// stored and whether it is calibrated. A missing dir lists just the demo.
func ListModels(dir string) ([]api.ModelEntry, error) {
	demo := api.ModelEntry{Name: api.DemoName, Embedded: true}
	describeModel(startlux.DemoModel(), DemoPath, &demo)
	list := []api.ModelEntry{demo}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return list, nil
	}
	if err != nil {
		return list, fmt.Errorf("list models: %w", err)
	}
	var found []api.ModelEntry
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || !(e.IsDir() || e.Type()&fs.ModeSymlink != 0) {
			continue
		}
		m := api.ModelEntry{Name: e.Name(), Path: p}
		if !decide.IsCheckpoint(p) {
			if fi, err := os.Stat(filepath.Join(p, "config.json")); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			m.Unloadable = "not a checkpoint: a checkpoint is " + decide.CheckpointRule
			if _, err := os.Stat(filepath.Join(p, decide.ConfigFile)); errors.Is(err, fs.ErrNotExist) {
				m.Unloadable = "no " + decide.ConfigFile + ", and no tokenizer.json to run it zero-shot with"
			}
		}
		describeModel(os.DirFS(p), p, &m)
		found = append(found, m)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return append(list, found...), nil
}

// describeModel fills in what a listing says of the model at the root of
// fsys (name is shown in errors): its provenance record, size, weight
// storage and calibration. A config.json the engine refuses makes the model
// unloadable, saying why.
func describeModel(fsys fs.FS, name string, m *api.ModelEntry) {
	if src, err := hub.ReadSourceFS(fsys, name); err == nil {
		m.Source, m.Revision, m.Commit, m.Bytes = src.Repo, src.Revision, src.Commit, src.Bytes()
	} else {
		m.Bytes = hub.TreeSize(fsys)
	}
	cfg := "config.json"
	if data, err := fs.ReadFile(fsys, decide.ConfigFile); err == nil {
		m.Calibrated = true
		if pc, err := decide.ParsePointerConfig(data); err == nil {
			cfg = path.Join(pc.Base, "config.json")
		}
	}
	data, err := fs.ReadFile(fsys, cfg)
	if err != nil {
		return
	}
	info, err := model.ParseConfig(cfg, data)
	if err != nil {
		if m.Unloadable == "" {
			m.Unloadable = err.Error()
		}
		return
	}
	m.Quant = info.Storage()
}

// ResolveModel turns what a user typed (a name in the models folder,
// [DemoName] or "" for the embedded demo, or a directory path) into the
// directory to load, "" meaning the embedded demo.
func ResolveModel(arg, modelsDir string) (string, error) {
	if arg == "" || arg == api.DemoName {
		return "", nil
	}
	if dir, ok, err := CheckpointPath(arg); err != nil {
		return "", fmt.Errorf("model %w", err)
	} else if ok {
		return dir, nil
	}
	dir := filepath.Join(modelsDir, arg)
	if !decide.IsCheckpoint(dir) {
		if _, err := os.Stat(dir); err == nil {
			return "", fmt.Errorf("model %q in %s is not a checkpoint (a checkpoint is %s)", arg, modelsDir, decide.CheckpointRule)
		}
		return "", fmt.Errorf("no model %q in %s (a checkpoint is %s; \"startlux models\" lists them)", arg, modelsDir, decide.CheckpointRule)
	}
	return dir, nil
}

// CheckpointPath tells a path from a name among the models a user can
// type: when arg is a path (it holds a path separator, or is "." or "..")
// it returns the absolute directory, checked to be a checkpoint, and ok
// true; for a name (in the models folder, or [api.DemoName]) ok is false.
// [ResolveModel] and "startlux use", which sends the daemon an absolute
// path since the daemon runs in another directory, share it.
func CheckpointPath(arg string) (dir string, ok bool, err error) {
	if !strings.ContainsRune(arg, filepath.Separator) && arg != "." && arg != ".." {
		return "", false, nil
	}
	if dir, err = filepath.Abs(arg); err != nil {
		return "", false, fmt.Errorf("%s: %w", arg, err)
	}
	if err := decide.CheckCheckpoint(dir); err != nil {
		return "", false, err
	}
	return dir, true, nil
}
