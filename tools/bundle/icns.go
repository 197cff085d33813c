package bundle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/png"

	"github.com/startlux/startlux/app/icon"
)

// IconEntry is one image of an .icns file: its four-character type and the
// pixel size that type stands for.
type IconEntry struct {
	Type string
	Size int
}

// IconEntries returns the PNG-encoded entry types an app icon carries, from
// 16×16 to 1024×1024 (512pt @2x). Each type has one fixed pixel size.
func IconEntries() []IconEntry {
	return []IconEntry{
		{"icp4", 16},
		{"icp5", 32},
		{"ic11", 32}, // 16pt @2x
		{"ic12", 64}, // 32pt @2x
		{"ic07", 128},
		{"ic13", 256}, // 128pt @2x
		{"ic08", 256},
		{"ic14", 512}, // 256pt @2x
		{"ic09", 512},
		{"ic10", 1024}, // 512pt @2x
	}
}

// ICNS writes an Apple icon container: the magic "icns" and the total
// length, then one entry per image (type, length including its 8-byte
// header, PNG data). pngBySize maps a pixel size to the PNG drawn at it.
func ICNS(pngBySize map[int][]byte) ([]byte, error) {
	var body bytes.Buffer
	for _, e := range IconEntries() {
		data, ok := pngBySize[e.Size]
		if !ok {
			return nil, fmt.Errorf("icns: no %d×%d image for entry %s", e.Size, e.Size, e.Type)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("icns: entry %s: %w", e.Type, err)
		}
		if cfg.Width != e.Size || cfg.Height != e.Size {
			return nil, fmt.Errorf("icns: entry %s wants %d×%d, image is %d×%d", e.Type, e.Size, e.Size, cfg.Width, cfg.Height)
		}
		var h [8]byte
		copy(h[:4], e.Type)
		binary.BigEndian.PutUint32(h[4:], uint32(8+len(data)))
		body.Write(h[:])
		body.Write(data)
	}
	out := make([]byte, 8, 8+body.Len())
	copy(out, "icns")
	binary.BigEndian.PutUint32(out[4:], uint32(8+body.Len()))
	return append(out, body.Bytes()...), nil
}

// AppIconICNS draws the StartLux app icon at every size .icns needs and
// packs it.
func AppIconICNS() ([]byte, error) {
	bySize := map[int][]byte{}
	for _, e := range IconEntries() {
		if _, ok := bySize[e.Size]; ok {
			continue
		}
		data, err := icon.PNG(icon.App(e.Size))
		if err != nil {
			return nil, err
		}
		bySize[e.Size] = data
	}
	return ICNS(bySize)
}
