package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/startlux/startlux/tensor"
)

// Entry is one tensor to write: either Data holds its bytes, or Stream
// writes exactly Elems×DType.Size() bytes (for tensors too large to hold
// twice in memory).
type Entry struct {
	Name   string
	DType  tensor.DType
	Shape  []int
	Data   []byte
	Stream func(w io.Writer) error
}

func (e *Entry) bytes() int64 {
	n := int64(e.DType.Size())
	for _, d := range e.Shape {
		n *= int64(d)
	}
	return n
}

// F32 makes an F32 entry from values.
func F32(name string, shape []int, v []float32) Entry {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return Entry{Name: name, DType: tensor.F32, Shape: shape, Data: b}
}

// Write writes entries, in order, as a safetensors file with optional
// metadata.
func Write(w io.Writer, entries []Entry, meta map[string]string) error {
	header := make(map[string]any, len(entries)+1)
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for i := range entries {
		e := &entries[i]
		if _, dup := header[e.Name]; dup || e.Name == "" {
			return fmt.Errorf("safetensors: duplicate or empty tensor name %q", e.Name)
		}
		n := e.bytes()
		if e.Stream == nil && int64(len(e.Data)) != n {
			return fmt.Errorf("safetensors: tensor %s: %d bytes for %s %v, want %d", e.Name, len(e.Data), e.DType, e.Shape, n)
		}
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		header[e.Name] = rawInfo{DType: e.DType.String(), Shape: shape, Offsets: []int64{off, off + n}}
		off += n
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenb [8]byte
	binary.LittleEndian.PutUint64(lenb[:], uint64(len(hj)))
	bw.Write(lenb[:])
	bw.Write(hj)
	for i := range entries {
		e := &entries[i]
		if e.Stream == nil {
			if _, err := bw.Write(e.Data); err != nil {
				return err
			}
			continue
		}
		cw := &countWriter{w: bw}
		if err := e.Stream(cw); err != nil {
			return fmt.Errorf("safetensors: tensor %s: %w", e.Name, err)
		}
		if cw.n != e.bytes() {
			return fmt.Errorf("safetensors: tensor %s: streamed %d bytes, want %d", e.Name, cw.n, e.bytes())
		}
	}
	return bw.Flush()
}

// WriteFile writes entries to a new file at path.
func WriteFile(path string, entries []Entry, meta map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, entries, meta); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
