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
