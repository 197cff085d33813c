package cpu

import "testing"

// TestBLASName: the backend's BLAS name agrees with its Name, and the
// pure-Go backend has none.
func TestBLASName(t *testing.T) {
	b, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := "cpu (" + b.BLAS() + ")"; b.BLAS() != "" && b.Name() != want {
		t.Errorf("Name %q, BLAS %q", b.Name(), b.BLAS())
	}
	g, err := New(Options{Threads: 1, NoBLAS: true})
	if err != nil {
		t.Fatal(err)
	}
	if g.BLAS() != "" || g.Name() != "cpu-go" {
		t.Errorf("NoBLAS: BLAS %q, Name %q", g.BLAS(), g.Name())
	}
}
