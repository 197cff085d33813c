// Package startlux holds what the whole program shares at the top of the
// module: the embedded demo checkpoint.
package startlux

import (
	"embed"
	"io/fs"
)

//go:embed testdata/demo-decision/config.json testdata/demo-decision/decision_config.json testdata/demo-decision/model.safetensors testdata/demo-decision/tokenizer.json testdata/demo-decision/tokenizer_config.json
var demoFiles embed.FS

// DemoModel returns the embedded demo decision checkpoint (jevfmt/1, about
// 4 MB) as a file system whose root is the checkpoint directory.
func DemoModel() fs.FS {
	sub, err := fs.Sub(demoFiles, "testdata/demo-decision")
	if err != nil {
		panic(err) // the path is fixed at build time
	}
	return sub
}
