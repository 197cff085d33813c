package goldens

import (
	"math"
	"testing"
)

func TestMaxRel(t *testing.T) {
	nan := float32(math.NaN())
	for _, tt := range []struct {
		name string
		a, b []float32
		n    int
		want float64
	}{
		{"equal", []float32{1, 2, 3, 4}, []float32{1, 2, 3, 4}, 2, 0},
		{"worst vector wins", []float32{1, 0, 3, 4.5}, []float32{1, 0, 3, 4}, 2, 0.1},
		{"whole matrix", []float32{1, 0, 3, 4.5}, []float32{1, 0, 3, 4}, 4, 0.5 / math.Sqrt(26)},
		{"zero reference", []float32{0, 0}, []float32{0, 0}, 2, 0},
		{"lengths differ", []float32{1}, []float32{1, 2}, 2, math.Inf(1)},
		{"NaN", []float32{nan, 1}, []float32{1, 1}, 2, math.Inf(1)},
		{"no vector length", []float32{1}, []float32{1}, 0, math.Inf(1)},
	} {
		if got := MaxRel(tt.a, tt.b, tt.n); math.Abs(got-tt.want) > 1e-12 && !(math.IsInf(got, 1) && math.IsInf(tt.want, 1)) {
			t.Errorf("%s: MaxRel = %g, want %g", tt.name, got, tt.want)
		}
	}
}

func TestReadForward(t *testing.T) {
	const hidden, vocab, layers = 64, 4096, 6
	cases, err := ReadForward("../../testdata/goldens/tiny-qwen35.goldens.safetensors", layers)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.Name] = true
		T := len(c.IDs)
		if T == 0 || len(c.Norm) != T*hidden || len(c.Logits) != vocab || len(c.Layers) != layers {
			t.Errorf("%s: %d ids, norm %d, logits %d, %d layers", c.Name, T, len(c.Norm), len(c.Logits), len(c.Layers))
		}
		for i, l := range c.Layers {
			if len(l) != T*hidden {
				t.Errorf("%s: layer %d has %d values, want %d", c.Name, i, len(l), T*hidden)
			}
		}
		for _, id := range c.IDs {
			if id < 0 || id >= vocab {
				t.Errorf("%s: id %d outside the vocabulary", c.Name, id)
			}
		}
	}
	for _, want := range []string{"prompt", "rand1", "rand64", "rand65", "rand300"} {
		if !names[want] {
			t.Errorf("no case %s among %v", want, names)
		}
	}
	if _, err := ReadForward("../../testdata/goldens/decide-demo.json", 0); err == nil {
		t.Error("a JSON file read as safetensors goldens")
	}
}
