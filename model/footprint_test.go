package model_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/modeltest"
	"github.com/startlux/startlux/tensor"
)

// countingBackend counts the bytes of the tensors alive on a backend and
// their peak, the independent measure PassBytes is held to.
type countingBackend struct {
	tensor.Backend
	mu         sync.Mutex // guards live and peak
	live, peak int64
}

func (c *countingBackend) Alloc(n int) tensor.Tensor {
	c.mu.Lock()
	c.live += 4 * int64(n)
	c.peak = max(c.peak, c.live)
	c.mu.Unlock()
	return c.Backend.Alloc(n)
}

func (c *countingBackend) Free(t tensor.Tensor) {
	if t == nil {
		return
	}
	c.mu.Lock()
	c.live -= 4 * int64(t.Len())
	c.mu.Unlock()
	c.Backend.Free(t)
}

// reset makes the current live bytes the baseline of the next peak.
func (c *countingBackend) reset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak = c.live
	return c.live
}

func (c *countingBackend) grew(base int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak - base
}

// TestPassBytes runs forward passes and prefills of several shapes on
// checkpoints whose last layer is full attention and whose last layer is a
// DeltaNet, counting the tensors they allocate: PassBytes, PrefillBytes and
// StateBytes must be exactly what was allocated plus the backend scratch
// they add (which the count cannot see).
func TestPassBytes(t *testing.T) {
	for _, layers := range []int{4, 5} {
		c := modeltest.Qwen35Small(layers)
		c.Hidden, c.Intermediate, c.Vocab, c.MaxPositions = 64, 160, 300, 4096
		c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 4, 2, 16, 8
		c.NK, c.NV, c.DK, c.DV = 2, 4, 16, 16
		dir := t.TempDir()
		if _, err := modeltest.Write(dir, c, modeltest.Options{}); err != nil {
			t.Fatal(err)
		}
		inner, err := cpu.New(cpu.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		be := &countingBackend{Backend: inner}
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		cfg := m.Config
		last := "full attention"
		if cfg.Linear[cfg.Layers-1] {
			last = "DeltaNet"
		}
		ids := func(n, seed int) []int32 {
			out := make([]int32, n)
			for i := range out {
				out[i] = int32((i*31 + seed*7) % cfg.Vocab)
			}
			return out
		}
		// opScratch is the backend scratch PassBytes adds for a pass of
		// n positions (the delta rule's, the larger here).
		opScratch := func(n int) int64 { return 4 * int64(2*n*cfg.NK*cfg.DK+2*n*cfg.NV) }

		ctx := context.Background()
		for _, prefix := range []int{0, 37, 300} {
			base := be.reset()
			var pre *model.State
			if prefix > 0 {
				pre, err = m.Prefill(ctx, nil, ids(prefix, 1))
				if err != nil {
					t.Fatal(err)
				}
				est := cfg.PrefillBytes(0, prefix)
				if got := be.grew(base); got != est-opScratch(prefix) {
					t.Errorf("%s last, prefill of %d: %d bytes allocated, PrefillBytes %d (scratch %d)", last, prefix, got, est, opScratch(prefix))
				}
				if got, est := pre.Bytes(), cfg.StateBytes(prefix); got != est {
					t.Errorf("%s last: a state of %d positions holds %d bytes, StateBytes %d", last, prefix, got, est)
				}
			}
			for _, shape := range [][]int{{1}, {9, 4, 4}, {30, 30, 12, 3, 3, 1}} {
				rows := make([]model.Row, len(shape))
				s := model.PassShape{Rows: len(shape), Tokens: len(shape) * shape[0], HeadRows: 5}
				for i, n := range shape {
					rows[i] = model.Row{Prefix: pre, IDs: ids(n, i+2), Gather: []int{n - 1}}
					s.Context += prefix + n - 1
				}
				head := m.HeadRows([]int{1, 2, 3, 4, 5})
				base := be.reset()
				if _, err := m.Forward(ctx, rows, head); err != nil {
					t.Fatal(err)
				}
				got, est := be.grew(base), cfg.PassBytes(s)
				name := fmt.Sprintf("%s last, prefix %d, rows %v", last, prefix, shape)
				if got != est-opScratch(s.Tokens) {
					t.Errorf("%s: %d bytes allocated, PassBytes %d (scratch %d)", name, got, est, opScratch(s.Tokens))
				}
			}
			if pre != nil {
				base := be.reset()
				next, err := m.Prefill(ctx, pre, ids(50, 9))
				if err != nil {
					t.Fatal(err)
				}
				est := cfg.PrefillBytes(prefix, 50)
				if got := be.grew(base); got != est-opScratch(50) {
					t.Errorf("%s last, prefill of 50 after %d: %d bytes allocated, PrefillBytes %d", last, prefix, got, est)
				}
				next.Free()
				pre.Free()
			}
		}
	}
}

// TestReadWeightInfo holds ReadWeightInfo to the weights a load binds, for
// bf16 and MLX-quantised checkpoints, and its int8 figure to what
// converting the projections keeps (tensor.Weight.Bytes of the int8 form).
func TestReadWeightInfo(t *testing.T) {
	for _, bits := range []int{0, 4} {
		c := modeltest.Qwen35Small(4)
		c.Hidden, c.Intermediate, c.Vocab = 64, 128, 200
		c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 4, 2, 16, 8
		c.NK, c.NV, c.DK, c.DV = 2, 4, 16, 16
		dir := t.TempDir()
		if _, err := modeltest.Write(dir, c, modeltest.Options{Bits: bits}); err != nil {
			t.Fatal(err)
		}
		info, err := model.ReadWeightInfo(dir)
		if err != nil {
			t.Fatal(err)
		}
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.WeightBytes(); info.Stored != got {
			t.Errorf("%d bits: ReadWeightInfo says %d bytes stored, the loaded model's weights take %d", bits, info.Stored, got)
		}
		var int8 int64
		for _, s := range info.Config.Tensors() {
			if s.Role == model.RoleProjection {
				w, err := tensor.QuantizeInt8(tensor.FromFloat32(s.Name, tensor.F32, s.Shape, make([]float32, s.Shape[0]*s.Shape[1])))
				if err != nil {
					t.Fatal(err)
				}
				int8 += w.Bytes()
			}
		}
		if info.ProjectionInt8 != int8 {
			t.Errorf("%d bits: int8 projections estimated at %d bytes, converted they take %d", bits, info.ProjectionInt8, int8)
		}
		if r := info.Resident(true); r >= info.Stored && bits == 0 {
			t.Errorf("bf16: resident with int8 projections %d, not less than stored %d", r, info.Stored)
		}
		m.Close()
	}
}
