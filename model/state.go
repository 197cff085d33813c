package model

import "github.com/startlux/startlux/tensor"

// State is the state after a prefix (attention K/V per full layer, conv and recurrent state per DeltaNet layer),
// in backend memory. It is never modified after it is made.
type State struct {
	m      *Model
	n      int
	layers []layerState
	freed  bool
}

// layerState is one layer's part of a State: k and v ([n, KVHeads, HeadDim],
// token-major) for a full-attention layer; conv ([ConvK−1, Dconv], oldest
// first) and rec ([NV, DK, DV] float32) for a DeltaNet layer.
type layerState struct {
	k, v      tensor.Tensor
	conv, rec tensor.Tensor
}

// Len returns the number of positions the state covers.
func (s *State) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Bytes returns the backend memory the state holds.
func (s *State) Bytes() int64 {
	if s == nil || s.freed {
		return 0
	}
	var n int64
	for _, l := range s.layers {
		for _, t := range []tensor.Tensor{l.k, l.v, l.conv, l.rec} {
			if t != nil {
				n += 4 * int64(t.Len())
			}
		}
	}
	return n
}

// Free releases the state's backend memory; the caller must know nobody uses
// it any more. Freeing twice (or a nil state) does nothing.
func (s *State) Free() {
	if s == nil {
		return
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.freed {
		return
	}
	s.freeLocked()
}
