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

// layerState is one layer's part of a State: *kvState for a full-attention
// layer, *recurrentState for a DeltaNet layer.
type layerState interface {
	// tensors returns the backend tensors the state holds.
	tensors() []tensor.Tensor
}

// Len returns the number of positions the state covers.
func (s *State) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// kv returns full-attention layer i's part of the state, or nil when the
// state covers no positions.
func (s *State) kv(i int) *kvState {
	if s.Len() == 0 {
		return nil
	}
	return s.layers[i].(*kvState)
}

// recurrent returns DeltaNet layer i's part of the state, or nil when the
// state covers no positions.
func (s *State) recurrent(i int) *recurrentState {
	if s.Len() == 0 {
		return nil
	}
	return s.layers[i].(*recurrentState)
}

// Bytes returns the backend memory the state holds.
func (s *State) Bytes() int64 {
	if s == nil || s.freed {
		return 0
	}
	var n int64
	for _, l := range s.layers {
		for _, t := range l.tensors() {
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

// freeLocked frees a state while the caller holds the model's lock.
func (s *State) freeLocked() {
	for _, l := range s.layers {
		if l == nil {
			continue // a pass that failed before reaching the layer
		}
		for _, t := range l.tensors() {
			if t != nil {
				s.m.be.Free(t)
			}
		}
	}
	s.layers = nil
	s.freed = true
}
