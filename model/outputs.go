package model

import (
	"context"
	"errors"

	"github.com/startlux/startlux/model/safetensors"
)

// Outputs runs ids as one row and returns what "startlux forward" writes,
// as the transformers goldens hold it: the final normed hidden states of
// every position ("norm", [T, Hidden] f32) and the last position's logits
// against the full LM head ("logits_last", [Vocab] f32).
func (m *Model) Outputs(ctx context.Context, ids []int32) ([]safetensors.Entry, error) {
	if len(ids) == 0 {
		return nil, errors.New("outputs: no token ids")
	}
	T := len(ids)
	all := make([]int, T)
	for i := range all {
		all[i] = i
	}
	norm, err := m.Forward(ctx, []Row{{IDs: ids, Gather: all}}, nil)
	if err != nil {
		return nil, err
	}
	logits, err := m.Forward(ctx, []Row{{IDs: ids, Gather: []int{T - 1}}}, m.Head())
	if err != nil {
		return nil, err
	}
	return []safetensors.Entry{
		safetensors.F32("norm", []int{T, m.Config.Hidden}, norm[0]),
		safetensors.F32("logits_last", []int{m.Config.Vocab}, logits[0]),
	}, nil
}

// WriteOutputs writes [Model.Outputs] of ids to a new safetensors file at
// path (metadata {"format": "pt"}, as torch's safetensors files have).
func (m *Model) WriteOutputs(ctx context.Context, ids []int32, path string) error {
	ents, err := m.Outputs(ctx, ids)
	if err != nil {
		return err
	}
	return safetensors.WriteFile(path, ents, map[string]string{"format": "pt"})
}
