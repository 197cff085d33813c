package model

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// faultingBackend is a backend whose waits fail, as a GPU's command buffers
// do when they fault.
type faultingBackend struct{ tensor.Backend }

var errFault = errors.New("command buffer failed")

func (b faultingBackend) Sync(ctx context.Context) error { b.Backend.Sync(ctx); return errFault }
func (b faultingBackend) Read(ctx context.Context, t tensor.Tensor, off int, dst []float32) error {
	b.Backend.Read(ctx, t, off, dst)
	return errFault
}

// TestPassFault: a pass whose wait fails returns the backend's error (a
// prefill frees the state it was making), never a panic.
func TestPassFault(t *testing.T) {
	m, err := Load(filepath.Join("..", "testdata", "tiny-qwen35"), faultingBackend{newBackend(t)}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := []int32{1, 2, 3, 4, 5}
	if st, err := m.Prefill(context.Background(), nil, ids); !errors.Is(err, errFault) || st != nil {
		t.Errorf("prefill: state %v, err %v", st, err)
	}
	if _, err := m.Forward(context.Background(), []Row{{IDs: ids, Gather: []int{4}}}, nil); !errors.Is(err, errFault) {
		t.Errorf("forward: %v", err)
	}
}
