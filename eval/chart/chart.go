// Package chart draws an evaluation report as one PNG: per question type a
// reliability diagram (accuracy against confidence over the ECE bins, with
// the diagonal of perfect calibration) above a position histogram (how
// often each option position was chosen and how often it was right).
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
	"github.com/startlux/startlux/internal/atomicfile"
)

// Panel size in pixels, and the resolution the PNG is drawn at.
const (
	PanelWidth  = 420
	PanelHeight = 340
	DPI         = 96
)

// letters names the first option positions as a jevfmt/1 row does.
const letters = "ABCDEFGHIJKLMNOPQRSTUVWXY"

var (
	barColor    = color.RGBA{R: 70, G: 110, B: 180, A: 255}
	rightColor  = color.RGBA{R: 220, G: 140, B: 40, A: 255}
	pointColor  = color.RGBA{R: 200, G: 40, B: 40, A: 255}
	diagonalGap = color.Gray{Y: 120}
)

// Size returns the pixel size of the report's PNG: one column per question
// type in the report, two rows.
func Size(rep *eval.Report) (width, height int) {
	return PanelWidth * len(types(rep)), 2 * PanelHeight
}

// WriteFile draws rep ([WritePNG]) into the PNG file at path, replacing
// it whole: a reader sees the old file or the new one, never a part. A
// report that cannot be drawn leaves the file as it was.
func WriteFile(path string, rep *eval.Report) error {
	var b bytes.Buffer
	if err := WritePNG(&b, rep); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644, "")
}

// WritePNG draws the report's figures and writes them to w as a PNG.
func WritePNG(w io.Writer, rep *eval.Report) error {
	ts := types(rep)
	if len(ts) == 0 {
		return errors.New("chart: the report has no questions")
	}
	width, height := Size(rep)
	inch := func(px int) vg.Length { return vg.Length(px) / DPI * vg.Inch }
	c := vgimg.NewWith(vgimg.UseWH(inch(width), inch(height)), vgimg.UseDPI(DPI))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: len(ts), PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	for col, t := range ts {
		m := rep.Types[t]
		rel, err := reliability(string(t), m)
		if err != nil {
			return err
		}
		rel.Draw(tiles.At(dc, col, 0))
		pos, err := positions(string(t), m)
		if err != nil {
			return err
		}
		pos.Draw(tiles.At(dc, col, 1))
	}
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

func types(rep *eval.Report) []decide.QuestionType {
	var ts []decide.QuestionType
	for _, t := range eval.Types {
		if m := rep.Types[t]; m != nil && m.N > 0 {
			ts = append(ts, t)
		}
	}
	return ts
}

// reliability plots each non-empty bin's accuracy as a bar over the bin, its
// mean confidence as a point, and the diagonal.
func reliability(typ string, m *eval.Metrics) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: reliability (n %d, ECE %.3f)", typ, m.N, m.ECE)
	p.X.Label.Text = "confidence"
	p.Y.Label.Text = "accuracy"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	w := 1.0 / eval.ECEBins
	h := &plotter.Histogram{Width: w, FillColor: barColor}
	h.LineStyle.Width = vg.Points(0.5)
	h.LineStyle.Color = color.White
	var pts plotter.XYs
	for k, b := range m.Bins {
		if b.Count == 0 {
			continue
		}
		acc := float64(b.Correct) / float64(b.Count)
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: float64(k) * w, Max: float64(k+1) * w, Weight: acc})
		pts = append(pts, plotter.XY{X: b.SumConf / float64(b.Count), Y: acc})
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return nil, err
	}
	diag.Color = diagonalGap
	diag.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	sc.GlyphStyle.Color = pointColor
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(h, diag, sc)
	p.Legend.Add("accuracy per bin", h)
	p.Legend.Add("mean confidence", sc)
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}

// positions plots, per option position, the fraction of questions that
// chose it and the fraction whose right option was there.
func positions(typ string, m *eval.Metrics) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: positions (recall std %.3f)", typ, m.PositionRecallStd)
	p.Y.Label.Text = "fraction of questions"
	p.Y.Min = 0
	chosen := make(plotter.Values, len(m.Chosen))
	right := make(plotter.Values, len(m.Right))
	names := make([]string, len(m.Chosen))
	for j := range m.Chosen {
		chosen[j] = float64(m.Chosen[j]) / float64(m.N)
		right[j] = float64(m.Right[j]) / float64(m.N)
		names[j] = strconv.Itoa(j + 1)
		if j < len(letters) {
			names[j] = letters[j : j+1]
		}
	}
	width := vg.Points(max(2, 120/float64(max(len(names), 1))))
	bc, err := plotter.NewBarChart(chosen, width)
	if err != nil {
		return nil, err
	}
	bc.Color = barColor
	bc.LineStyle.Width = 0
	bc.Offset = -width / 2
	br, err := plotter.NewBarChart(right, width)
	if err != nil {
		return nil, err
	}
	br.Color = rightColor
	br.LineStyle.Width = 0
	br.Offset = width / 2
	top := 0.0
	for j := range chosen {
		top = max(top, chosen[j], right[j])
	}
	p.Y.Max = top * 1.25 // room for the legend
	p.Add(bc, br)
	p.Legend.Add("chosen", bc)
	p.Legend.Add("right", br)
	p.Legend.Top = true
	p.NominalX(names...)
	return p, nil
}
