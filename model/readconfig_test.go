package model

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadConfig(t *testing.T) {
	for _, dir := range []string{tinyDir, mlx4Dir, demoDir} {
		cfg, err := ReadConfig(os.DirFS(dir), dir)
		if err != nil {
			t.Fatal(err)
		}
		// The same config as a full load reads.
		if m := loadTiny(t, dir); !reflect.DeepEqual(cfg, m.Config) {
			t.Errorf("%s: ReadConfig %+v, Load %+v", dir, cfg, m.Config)
		}
	}
	if _, err := ReadConfig(os.DirFS(t.TempDir()), "empty"); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("missing config: %v", err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"hidden_size": "wide"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfig(os.DirFS(bad), bad); err == nil {
		t.Error("a broken config was accepted")
	}
}
