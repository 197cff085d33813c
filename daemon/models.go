package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
)

// DemoName is the name under which the embedded demo checkpoint is listed
// and loaded.
const DemoName = "demo"

// ModelsDir returns the folder where checkpoints are looked for
// ([ipc.ModelsDir]).
func ModelsDir() (string, error) { return ipc.ModelsDir() }

// ModelEntry is one checkpoint the daemon can load.
type ModelEntry = ipc.ModelEntry

// IsCheckpoint reports whether dir holds a decision checkpoint: a
// decision_config.json next to a config.json (jevfmt/1), or naming a base
// directory that holds one (pointer/1).
func IsCheckpoint(dir string) bool { return decide.IsCheckpoint(dir) }

// ListModels returns the embedded demo followed by the checkpoints found
// directly inside dir, by name. A missing dir lists just the demo.
func ListModels(dir string) ([]ModelEntry, error) {
	list := []ModelEntry{{Name: DemoName, Embedded: true}}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return list, nil
	}
	if err != nil {
		return list, fmt.Errorf("list models: %w", err)
	}
	var found []ModelEntry
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if (e.IsDir() || e.Type()&fs.ModeSymlink != 0) && IsCheckpoint(p) {
			found = append(found, ModelEntry{Name: e.Name(), Path: p})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return append(list, found...), nil
}

// ResolveModel turns what a user typed (a name in the models folder,
// [DemoName] or "" for the embedded demo, or a directory path) into the
// directory to load, "" meaning the embedded demo.
func ResolveModel(arg, modelsDir string) (string, error) {
	if arg == "" || arg == DemoName {
		return "", nil
	}
	if strings.ContainsRune(arg, filepath.Separator) || arg == "." || arg == ".." {
		dir, err := filepath.Abs(arg)
		if err != nil {
			return "", fmt.Errorf("model %s: %w", arg, err)
		}
		if !IsCheckpoint(dir) {
			return "", fmt.Errorf("model %s is not a checkpoint (a directory with decision_config.json and config.json)", dir)
		}
		return dir, nil
	}
	dir := filepath.Join(modelsDir, arg)
	if !IsCheckpoint(dir) {
		return "", fmt.Errorf("no model %q in %s (a checkpoint is a directory with decision_config.json and config.json; \"startlux models\" lists them)", arg, modelsDir)
	}
	return dir, nil
}
