package metal_test

import (
	"context"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// TestInt8Model loads the tiny checkpoint with int8 projections
// (model.LoadOptions.Int8, which reaches the backend through
// tensor.Int8Backend) on the backend under test and on the CPU backend:
// the int8 products are exact on both, so the final hidden states agree to
// float32 rounding elsewhere in the graph (perPosTol, as for float).
func TestInt8Model(t *testing.T) {
	be, err := metal.OpenUnderTest()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ms [2]*model.Model
	for i, b := range []tensor.Backend{be, cb} {
		m, err := model.Load("../testdata/tiny-qwen35", b, model.LoadOptions{Int8: &model.Int8Options{}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms[i] = m
	}
	if ms[0].Int8() != metal.Int8KernelName {
		t.Errorf("Int8() = %q, want %q", ms[0].Int8(), metal.Int8KernelName)
	}
	ids := []int32{5, 9, 200, 31, 7, 1000, 44, 3, 2047, 12}
	var outs [2][]float32
	for i, m := range ms {
		o, err := m.Forward(context.Background(), []model.Row{{IDs: ids, Gather: seq(len(ids))}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = o[0]
	}
	if r := goldens.MaxRel(outs[0], outs[1], ms[0].Config.Hidden); r > perPosTol {
		t.Errorf("int8 hidden states: %s against the CPU backend's, relative error %.2e per position", be.Name(), r)
	}
}
