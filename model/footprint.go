package model

import (
	"fmt"
	"io/fs"
)

// This file says what a model holds before it is loaded: its weights as
// they will be resident, and the backend memory of a forward pass or a
// prefill of a given shape, counted from the graph's own buffers (pass,
// newBatch, the mixers), so that a caller can tell whether a checkpoint
// fits the machine before it maps it.

// PassShape is the shape of a forward pass (Forward) for [Config.PassBytes].
type PassShape struct {
	// Tokens is the pass's padded positions: rows × the longest row.
	Tokens int
	// Rows is the number of rows.
	Rows int
	// Gathered is the number of positions whose output is read, over all
	// rows (0: one per row).
	Gathered int
	// Context is the number of positions the gathered queries of the last
	// layer attend over, all rows together (each row's prefix and its own
	// positions up to its last gathered one), when that layer is full
	// attention.
	Context int
	// HeadRows is the number of LM head rows multiplied (0: the hidden
	// states are returned).
	HeadRows int
}

// PassBytes returns the backend memory a forward pass of shape s holds at
// most: its activations and scratch tensors, each row's copy of its
// prefix's recurrent state, and the largest scratch a backend operation
// takes besides (the CPU backend's gated delta rule and prefix attention).
// The rows' prefix states are not included: they are held elsewhere.
func (c *Config) PassBytes(s PassShape) int64 {
	n, b := int64(s.Tokens), int64(s.Rows)
	g := int64(s.Gathered)
	if g == 0 {
		g = b
	}
	f := n*c.tokenFloats() + c.opScratch(n)
	if c.hasLinear() {
		f += b * c.recFloats()
	}
	H, I := int64(c.Hidden), int64(c.Intermediate)
	kw, qw := int64(c.KVHeads*c.HeadDim), int64(c.Heads*c.HeadDim)
	// The last layer runs only the gathered positions after its mixer
	// (layer, gatheredTokens): their residual, normed input and MLP.
	f += g * (2*H + 2*I)
	if c.Linear[c.Layers-1] {
		f += g * (int64(c.NV*c.DV) + H) // mixGathered: the rule's output and the projection
	} else {
		// mixGathered: x, q with gates, q, gate, attention output, keys,
		// values and the projection of the gathered positions, and each
		// row's keys and values up to its last gathered position.
		f += g*(H+2*qw+3*qw+2*kw+H) + 2*int64(s.Context)*kw
	}
	f += g * int64(s.HeadRows)
	return 4 * f
}

// PrefillBytes returns the backend memory a Prefill of tokens positions
// after a prefix of prefix positions holds at most: the pass and the new
// state (which covers prefix + tokens positions). The prefix's own state is
// not included.
func (c *Config) PrefillBytes(prefix, tokens int) int64 {
	n := int64(tokens)
	f := n*c.tokenFloats() + c.opScratch(n)
	return 4*f + c.StateBytes(prefix+tokens)
}

// StateBytes returns the backend memory of a State covering positions
// positions (Prefill's result): each full-attention layer's keys and values,
// each DeltaNet layer's conv and recurrent state.
func (c *Config) StateBytes(positions int) int64 {
	var f int64
	kw := int64(c.KVHeads * c.HeadDim)
	for _, lin := range c.Linear {
		if lin {
			f += int64((c.ConvK-1)*c.convWidth()) + c.recFloats()
		} else {
			f += 2 * int64(positions) * kw
		}
	}
	return 4 * f
}

// tokenFloats is what every position of a pass holds: the residual stream,
// the normed input and a layer part's output (batch.h, x, y), the four
// shared buffers (batch.slot), the attention's keys and values and the
// DeltaNet's a and b projections.
func (c *Config) tokenFloats() int64 {
	sizes := [4]int{c.Intermediate, c.Intermediate}
	for _, lin := range c.Linear {
		var w [4]int
		if lin {
			w = (&deltaNet{}).widths(c)
		} else {
			w = (&attention{}).widths(c)
		}
		for j := range sizes {
			sizes[j] = max(sizes[j], w[j])
		}
	}
	f := int64(3 * c.Hidden)
	for _, s := range sizes {
		f += int64(s)
	}
	if c.hasAttention() {
		f += int64(2 * c.KVHeads * c.HeadDim)
	}
	if c.hasLinear() {
		f += int64(2 * c.NV)
	}
	return f
}

// opScratch is the largest scratch one backend operation of a pass of n
// positions takes for itself: the gated delta rule's normalised queries and
// keys with β and g, or the prefix attention's per-query maxima and sums.
func (c *Config) opScratch(n int64) int64 {
	var f int64
	if c.hasLinear() {
		f = 2*n*int64(c.NK*c.DK) + 2*n*int64(c.NV)
	}
	if c.hasAttention() {
		f = max(f, 2*n*int64(c.Heads))
	}
	return f
}

func (c *Config) recFloats() int64 { return int64(c.NV * c.DK * c.DV) }
func (c *Config) convWidth() int   { return 2*c.NK*c.DK + c.NV*c.DV }

func (c *Config) hasLinear() bool {
	for _, lin := range c.Linear {
		if lin {
			return true
		}
	}
	return false
}

func (c *Config) hasAttention() bool {
	for _, lin := range c.Linear {
		if !lin {
			return true
		}
	}
	return false
}

// WeightInfo is what a checkpoint's weights take, read from its tensor
// headers without touching the weights.
type WeightInfo struct {
	// Config is the checkpoint's text configuration.
	Config Config
	// Stored is the bytes of every weight the graph reads, as stored
	// (quantised weights with their scales and biases).
	Stored int64
	// Projections is the part of Stored in the large projections, the
	// weights an int8 load converts.
	Projections int64
	// ProjectionInt8 is what those projections take once converted to
	// int8: a byte per element and a scale and a sum per row.
	ProjectionInt8 int64
}

// Resident returns the bytes the weights hold while the model serves: as
// stored, or with the projections converted to int8.
func (w WeightInfo) Resident(int8 bool) int64 {
	if int8 {
		return w.Stored - w.Projections + w.ProjectionInt8
	}
	return w.Stored
}

// ReadWeightInfo reads the tensor headers of the checkpoint in dir and says
// what the weights the graph reads take. The files are opened as Load opens
// them (mapped, not read), so nothing of the weights becomes resident.
func ReadWeightInfo(dir string) (WeightInfo, error) {
	return readWeightInfo(dirSource{dir: dir}, dir)
}

// ReadWeightInfoFS is ReadWeightInfo for a checkpoint at the root of fsys
// (the embedded demo model), whose tensors are read into memory as LoadFS
// reads them; name is shown in errors.
func ReadWeightInfoFS(fsys fs.FS, name string) (WeightInfo, error) {
	return readWeightInfo(fsSource{fsys: fsys, name: name}, name)
}

func readWeightInfo(src source, name string) (WeightInfo, error) {
	cfgData, err := src.readFile("config.json")
	if err != nil {
		return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
	}
	cfg, quant, err := parseConfig(src.display("config.json"), cfgData)
	if err != nil {
		return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
	}
	m := &Model{Config: cfg, name: name}
	defer m.Close()
	all, index, err := m.openFiles(src)
	if err != nil {
		return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
	}
	r, err := newResolver(all, quant, src.display(index))
	if err != nil {
		return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
	}
	if err := checkWeights(src.display("config.json"), &m.Config, r); err != nil {
		return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
	}
	if !r.hasHead() {
		m.Config.Tied = true
	}
	m.layers = newLayers(&m.Config)
	info := WeightInfo{Config: m.Config}
	for _, ref := range m.weights() {
		w, err := r.weight(ref.Name, ref.wanted())
		if err != nil {
			return WeightInfo{}, fmt.Errorf("weights of %s: %w", name, err)
		}
		n := w.Bytes()
		info.Stored += n
		if ref.Role == RoleProjection {
			info.Projections += n
			info.ProjectionInt8 += int64(w.Rows()) * (int64(w.Cols()) + 8)
		}
	}
	return info, nil
}
