package decide

import (
	"testing"

	"github.com/startlux/startlux/cpu"
)

// TestEstimateWeights holds Estimate's weights to what the opened engine
// says it holds, in float and with int8 projections: the fit check counts
// what a load will hold.
func TestEstimateWeights(t *testing.T) {
	for _, int8 := range []bool{false, true} {
		be, err := cpu.New(cpu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Estimate(demoDir(), Options{Int8: int8}, int8)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Open(demoDir(), be, Options{Int8: int8})
		if err != nil {
			t.Fatal(err)
		}
		got := e.Info().WeightBytes
		e.Close()
		if f.Weights != got {
			t.Errorf("int8 %v: estimated weights %d bytes, the engine holds %d", int8, f.Weights, got)
		}
	}
}

// TestEstimateZeroShot: a checkpoint without a decision config is estimated
// as it opens, on the config DeriveConfig gives it: the same footprint as
// with that config written out, and the weights the opened engine holds.
func TestEstimateZeroShot(t *testing.T) {
	got, err := Estimate(chatDir(), Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Estimate(chatCopy(t, map[string][]byte{ConfigFile: writtenConfig("")}), Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("zero-shot estimate %+v, with the derived config written out %+v", got, want)
	}
	e, err := openDir(t, chatDir())
	if err != nil {
		t.Fatal(err)
	}
	if w := e.Info().WeightBytes; got.Weights != w || !e.Info().Derived {
		t.Errorf("estimated weights %d bytes, the zero-shot engine holds %d (derived %v)", got.Weights, w, e.Info().Derived)
	}
}
