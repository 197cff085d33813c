package model

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/startlux/startlux/internal/sysmem"
)

// The largest value config.json may give each size. They are far above any
// Qwen3.5 checkpoint (the largest dense one has 64 layers, width 5120 and a
// vocabulary of 248,320) and low enough that nothing sized by them before the
// tensors are checked (the per-layer tables) can take noticeable memory; the
// widths are then held to the tensors' shapes, whose bytes are in the files.
const (
	maxLayers       = 1024
	maxHidden       = 1 << 16
	maxIntermediate = 1 << 18
	maxVocab        = 1 << 22
	maxHeads        = 1024
	maxHeadDim      = 1024
	maxConvKernel   = 64
	maxPositions    = 1 << 24
)

// maxJSONFile bounds the JSON files a checkpoint has read whole
// (config.json, model.safetensors.index.json): real ones are kilobytes.
const maxJSONFile = 16 << 20

// readJSONFile reads a small file whole, refusing one over maxJSONFile
// before reading it.
func readJSONFile(path string) ([]byte, error) { return ReadFileMax(path, maxJSONFile) }

// ReadFileMax reads a checkpoint file whole, refusing one of more than max
// bytes before reading it (a checkpoint's JSON, tokenizer and head files are
// read into memory; a damaged or hostile one must not take it all).
func ReadFileMax(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a checkpoint's %s may have", path, st.Size(), max, filepath.Base(path))
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

// checkShape checks the sizes parsed from config.json against each other:
// what the graph divides must divide. tc is where they were read (for the
// field names in errors).
func checkShape(tc jsonObj, c *Config) error {
	if c.KVHeads > c.Heads || c.Heads%c.KVHeads != 0 {
		return tc.errf("num_key_value_heads", "%d does not divide num_attention_heads %d", c.KVHeads, c.Heads)
	}
	if c.NV%c.NK != 0 {
		return tc.errf("linear_num_value_heads", "%d is not a multiple of linear_num_key_heads %d", c.NV, c.NK)
	}
	if c.HeadDim%2 != 0 {
		return tc.errf("head_dim", "is %d, want an even number (rotary pairs)", c.HeadDim)
	}
	if c.ConvK < 2 {
		return tc.errf("linear_conv_kernel_dim", "is %d, want at least 2", c.ConvK)
	}
	return nil
}

// checkWeights checks, before any per-layer structure is made, that the
// tensors hold as many layers as config.json says and that the weights fit
// in the machine's memory: a config that does not describe its files (a
// billion layers over six layers' tensors) is refused here, naming both
// counts, and so is a checkpoint that cannot fit. (Every tensor's bytes are
// checked against its file when it is opened, and its shape against the
// config when it is bound.)
func checkWeights(cfgFile string, c *Config, r *resolver) error {
	stored := 0 // 1 + the highest layer index among the tensors
	for k := range r.all {
		rest, ok := strings.CutPrefix(k, r.lay.prefix+"layers.")
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(num); ok && err == nil && n >= 0 && n < maxLayers {
			stored = max(stored, n+1)
		}
	}
	if stored < c.Layers {
		return fmt.Errorf("%s says num_hidden_layers is %d, but the checkpoint's tensors hold %d layers: the config does not match the weights", cfgFile, c.Layers, stored)
	}
	if mem, ok := sysmem.Total(); ok && r.total > mem {
		return fmt.Errorf("the checkpoint's weights take %s, more than this machine's memory (%s)", byteSize(float64(r.total)), byteSize(float64(mem)))
	}
	return nil
}

// byteSize formats a byte count for people.
func byteSize(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	}
	return fmt.Sprintf("%.0f bytes", n)
}
