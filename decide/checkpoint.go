package decide

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckpointRule says what a decision checkpoint is, for messages.
const CheckpointRule = "a directory with " + ConfigFile + " and the model's config.json, beside it (jevfmt/1) or in the base directory it names (pointer/1), or with no " + ConfigFile + " a config.json and a tokenizer.json (run zero-shot)"

// ErrNotCheckpoint is what [CheckCheckpoint] says of a directory that holds
// no decision checkpoint.
var ErrNotCheckpoint = errors.New("not a checkpoint")

// CheckCheckpoint returns nil when dir holds a decision checkpoint of either
// family ([CheckpointRule]), and otherwise an error wrapping
// [ErrNotCheckpoint] that names dir and says what a checkpoint is. It reads
// the decision config (through the seam [Open] reads it by) and checks that
// config.json is where it says, loading nothing.
func CheckCheckpoint(dir string) error {
	notOne := fmt.Errorf("%s is %w (%s)", dir, ErrNotCheckpoint, CheckpointRule)
	isFile := func(elem ...string) bool {
		fi, err := os.Stat(filepath.Join(append([]string{dir}, elem...)...))
		return err == nil && fi.Mode().IsRegular()
	}
	data, derived, err := decisionConfig(dirSource(dir, nil).read)
	if derived && isFile("config.json") && isFile("tokenizer.json") {
		return nil // zero-shot, on a config derived at load (DeriveConfig)
	}
	if err != nil || derived {
		return notOne
	}
	base := "."
	if ConfigFormat(data) == PointerFormat {
		c, err := ParsePointerConfig(data)
		if err != nil {
			return notOne
		}
		base = c.Base
	}
	if !isFile(filepath.FromSlash(base), "config.json") {
		return notOne
	}
	return nil
}

// IsCheckpoint reports whether dir holds a decision checkpoint of either
// family ([CheckCheckpoint] returns nil).
func IsCheckpoint(dir string) bool { return CheckCheckpoint(dir) == nil }
