package chart

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
)

// TestWritePNG draws a report of two types: the PNG decodes at two panels
// by two, and the panels are not blank.
func TestWritePNG(t *testing.T) {
	var recs []eval.Record
	for i := range 60 {
		recs = append(recs,
			eval.Record{Type: decide.Noul, Probs: []float64{0.6, 0.3, 0.1}, Label: i % 3},
			eval.Record{Type: decide.Choice, Probs: []float64{0.2, 0.8}, Label: i % 2})
	}
	rep := eval.Compute(recs)
	var buf bytes.Buffer
	if err := WritePNG(&buf, rep); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2*PanelWidth || b.Dy() != 2*PanelHeight {
		t.Errorf("PNG %v, want %d×%d", b, 2*PanelWidth, 2*PanelHeight)
	}
	if w, h := Size(rep); w != 2*PanelWidth || h != 2*PanelHeight {
		t.Errorf("Size %d×%d", w, h)
	}
	for _, q := range []image.Rectangle{
		image.Rect(0, 0, PanelWidth, PanelHeight), image.Rect(PanelWidth, PanelHeight, 2*PanelWidth, 2*PanelHeight),
	} {
		if distinctColours(img, q) < 3 {
			t.Errorf("panel %v is nearly blank", q)
		}
	}
	if err := WritePNG(&buf, eval.Compute(nil)); err == nil {
		t.Error("an empty report drew")
	}
}

func distinctColours(img image.Image, r image.Rectangle) int {
	seen := map[[4]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			seen[[4]uint32{cr, cg, cb, ca}] = true
		}
	}
	return len(seen)
}

// TestWriteFile writes the PNG WritePNG draws to a file, and leaves an
// existing file alone when the report cannot be drawn.
func TestWriteFile(t *testing.T) {
	recs := []eval.Record{{Type: decide.Noul, Probs: []float64{0.6, 0.3, 0.1}, Label: 0}, {Type: decide.Noul, Probs: []float64{0.2, 0.7, 0.1}, Label: 2}}
	rep := eval.Compute(recs)
	var want bytes.Buffer
	if err := WritePNG(&want, rep); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "eval.png")
	for _, tt := range []struct {
		name string
		rep  *eval.Report
		ok   bool
	}{
		{"report", rep, true},
		{"empty report", eval.Compute(nil), false},
	} {
		if err := WriteFile(path, tt.rep); (err == nil) != tt.ok {
			t.Errorf("%s: error %v", tt.name, err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: the file is not the PNG of the report (%d bytes, %v)", tt.name, len(got), err)
		}
	}
}
