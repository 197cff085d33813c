package metal

import (
	"context"
	"testing"
	"time"
)

func TestQuickAdd(t *testing.T) {
	t0 := time.Now()
	be, err := NewEmulated(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build %v", time.Since(t0))
	a := be.Alloc(1000)
	c := be.Alloc(1000)
	x := make([]float32, 1000)
	y := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
		y[i] = 2
	}
	be.Write(a, 0, x)
	be.Write(c, 0, y)
	be.Add(a, c, 999)
	out := make([]float32, 1000)
	if err := be.Read(context.Background(), a, 0, out); err != nil {
		t.Fatal(err)
	}
	if out[5] != 7 || out[999] != 999 {
		t.Fatal(out[:10], out[999])
	}
}
