package goldens

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/startlux/startlux/model/safetensors"
	"github.com/startlux/startlux/tensor"
)

// Forward is one case of a *.goldens.safetensors file of the forward pass:
// its token ids, each decoder layer's output [T, H] (nil for a layer the
// file does not hold), the final normed hidden states [T, H] and the last
// position's logits.
type Forward struct {
	Name   string
	IDs    []int32
	Layers [][]float32
	Norm   []float32
	Logits []float32
}

// ReadForward reads the cases of a forward-pass goldens file, in name
// order, with the outputs of the first layers layers (0: none).
func ReadForward(path string, layers int) ([]Forward, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Forward
	for _, n := range f.Names() {
		name, ok := strings.CutSuffix(n, ".ids")
		if !ok {
			continue
		}
		info := f.Tensor(n)
		if info.DType != tensor.I32 {
			return nil, fmt.Errorf("%s: %s is %s, want I32", path, n, info.DType)
		}
		c := Forward{Name: name, IDs: make([]int32, info.Elems())}
		for i := range c.IDs {
			c.IDs[i] = int32(binary.LittleEndian.Uint32(info.Data[4*i:]))
		}
		get := func(key string) []float32 {
			if t := f.Tensor(name + "." + key); t != nil {
				return t.Weight().Float32s()
			}
			return nil
		}
		for i := range layers {
			c.Layers = append(c.Layers, get("layer."+strconv.Itoa(i)))
		}
		c.Norm, c.Logits = get("norm"), get("logits_last")
		if c.Norm == nil || c.Logits == nil {
			return nil, fmt.Errorf("%s: case %s lacks norm or logits_last", path, name)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no cases")
	}
	return out, nil
}

// Forwards is ReadForward for tests: it fails t on any error.
func Forwards(t testing.TB, path string, layers int) []Forward {
	t.Helper()
	cases, err := ReadForward(path, layers)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}
