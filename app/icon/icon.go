// Package icon draws StartLux's mark — a small sun — in pure Go, for the app
// icon (a coloured rounded square), the macOS menu-bar template image (black
// with alpha) and the Linux tray icon.
package icon

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
)

// subsamples is the number of samples per pixel side used for antialiasing.
const subsamples = 4

// shape is a signed distance field over the unit square: negative inside.
type shape func(x, y float64) float64

// Geometry of the mark, in the unit square.
const (
	sunCX, sunCY = 0.5, 0.5
	sunCore      = 0.21
	rayIn        = 0.31
	rayOut       = 0.43
	rayHalf      = 0.045
)

// rays holds the end points of the mark's eight rays (x0, y0, x1, y1).
var rays = func() (r [8][4]float64) {
	for i := range r {
		a := float64(i) * math.Pi / 4
		r[i] = [4]float64{sunCX + rayIn*math.Cos(a), sunCY + rayIn*math.Sin(a), sunCX + rayOut*math.Cos(a), sunCY + rayOut*math.Sin(a)}
	}
	return r
}()

// sun is the mark: a disc with eight rounded rays, centred in the unit square
// and filling about 90% of it.
func sun(x, y float64) float64 {
	d := math.Hypot(x-sunCX, y-sunCY) - sunCore
	for _, r := range rays {
		d = min(d, segmentDist(x, y, r[0], r[1], r[2], r[3])-rayHalf)
	}
	return d
}

// segmentDist is the distance from (x, y) to the segment a–b.
func segmentDist(x, y, ax, ay, bx, by float64) float64 {
	px, py := x-ax, y-ay
	dx, dy := bx-ax, by-ay
	t := (px*dx + py*dy) / (dx*dx + dy*dy)
	t = max(0, min(1, t))
	return math.Hypot(px-t*dx, py-t*dy)
}

// roundedRect is a rounded square inset by margin with corner radius r.
func roundedRect(margin, r float64) shape {
	return func(x, y float64) float64 {
		half := 0.5 - margin
		qx := math.Abs(x-0.5) - half + r
		qy := math.Abs(y-0.5) - half + r
		outside := math.Hypot(max(qx, 0), max(qy, 0))
		return outside + min(max(qx, qy), 0) - r
	}
}

// scaled maps s into the sub-square [off, off+scale]² of the unit square.
func scaled(s shape, off, scale float64) shape {
	return func(x, y float64) float64 {
		return s((x-off)/scale, (y-off)/scale) * scale
	}
}

// coverage renders s into an alpha mask of size×size. A pixel whose centre
// lies farther than a pixel's diagonal from the edge is fully in or out (s is
// a distance); only pixels near the edge are supersampled.
func coverage(s shape, size int) *image.Alpha {
	m := image.NewAlpha(image.Rect(0, 0, size, size))
	px1 := 1 / float64(size)
	n := float64(size * subsamples)
	for py := range size {
		for px := range size {
			d := s((float64(px)+0.5)*px1, (float64(py)+0.5)*px1)
			switch {
			case d < -px1:
				m.Pix[py*m.Stride+px] = 0xff
				continue
			case d > px1:
				continue
			}
			hits := 0
			for sy := range subsamples {
				for sx := range subsamples {
					x := (float64(px*subsamples+sx) + 0.5) / n
					y := (float64(py*subsamples+sy) + 0.5) / n
					if s(x, y) <= 0 {
						hits++
					}
				}
			}
			m.Pix[py*m.Stride+px] = uint8((hits*255 + subsamples*subsamples/2) / (subsamples * subsamples))
		}
	}
	return m
}

// Background colours of the app icon, top and bottom of a vertical gradient.
var (
	topColor    = color.NRGBA{R: 0xFF, G: 0xB3, B: 0x40, A: 0xFF}
	bottomColor = color.NRGBA{R: 0xF2, G: 0x6B, B: 0x1D, A: 0xFF}
)

// App draws the application icon at size×size pixels: the white mark on an
// orange rounded square, inset the way macOS icons are (824/1024 of the
// canvas, transparent around it).
func App(size int) *image.NRGBA {
	if size <= 0 {
		panic(fmt.Sprintf("icon: size %d", size))
	}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	const margin = 100.0 / 1024
	gradient := image.NewNRGBA(img.Bounds())
	for y := range size {
		t := (float64(y) + 0.5) / float64(size)
		c := color.NRGBA{
			R: lerp(topColor.R, bottomColor.R, t),
			G: lerp(topColor.G, bottomColor.G, t),
			B: lerp(topColor.B, bottomColor.B, t),
			A: 0xFF,
		}
		draw.Draw(gradient, image.Rect(0, y, size, y+1), image.NewUniform(c), image.Point{}, draw.Src)
	}
	draw.DrawMask(img, img.Bounds(), gradient, image.Point{}, coverage(roundedRect(margin, 185.0/1024), size), image.Point{}, draw.Over)
	mark := coverage(scaled(sun, 0.22, 0.56), size)
	draw.DrawMask(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, mark, image.Point{}, draw.Over)
	return img
}

// Template draws the menu-bar template image at size×size pixels: the mark
// in black, its shape carried by alpha alone, as macOS expects of a template
// image (the system tints it for light and dark menu bars).
func Template(size int) *image.NRGBA {
	if size <= 0 {
		panic(fmt.Sprintf("icon: size %d", size))
	}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	draw.DrawMask(img, img.Bounds(), image.NewUniform(color.Black), image.Point{}, coverage(scaled(sun, 0.03, 0.94), size), image.Point{}, draw.Src)
	return img
}

// PNG encodes img as PNG.
func PNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode icon png: %w", err)
	}
	return buf.Bytes(), nil
}

func lerp(a, b uint8, t float64) uint8 {
	return uint8(math.Round(float64(a) + (float64(b)-float64(a))*t))
}
