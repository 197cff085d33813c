package model

import (
	"fmt"
	"io/fs"
	"path"
)

// ReadConfig reads and checks config.json at the root of fsys (a
// checkpoint directory: os.DirFS(dir), or the embedded demo model) without
// opening its weights; name is shown in errors. It is what startlux doctor
// checks of each model.
func ReadConfig(fsys fs.FS, name string) (Config, error) {
	data, err := fs.ReadFile(fsys, "config.json")
	if err != nil {
		return Config{}, fmt.Errorf("read config of %s: %w", name, err)
	}
	cfg, _, err := parseConfig(path.Join(name, "config.json"), data)
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}
