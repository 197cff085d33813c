// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype,
// shape and byte range, then the raw little-endian data.
//
// A File is a view over the whole file's bytes (mmap'd by Open, or a byte
// slice given to Parse); the tensors it hands out alias those bytes and stay
// valid until Close.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// maxHeader bounds the JSON header (real checkpoints use well under 1 MB).
const maxHeader = 100 << 20

// Info describes one stored tensor.
type Info struct {
	Name  string
	DType tensor.DType
	Shape []int
	// Data is the tensor's bytes, a sub-slice of the file's bytes.
	Data []byte
}

// Elems returns the number of elements of the tensor.
func (i *Info) Elems() int {
	n := 1
	for _, d := range i.Shape {
		n *= d
	}
	return n
}

// Weight returns the tensor as a weight view over the file's bytes (no copy).
func (i *Info) Weight() *tensor.Weight {
	return &tensor.Weight{Name: i.Name, DType: i.DType, Shape: append([]int(nil), i.Shape...), Data: i.Data}
}

// File is an opened safetensors file.
type File struct {
	// Name is how errors refer to the file (its path, or a name in a file system).
	Name string
	// Metadata is the header's optional "__metadata__" string map.
	Metadata map[string]string

	tensors map[string]*Info
	data    []byte
	mapped  bool // data is an mmap of the file
	unmap   func() error
}

// Open maps the file at path read-only and parses its header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, unmap, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", path, err)
	}
	sf, err := Parse(path, data)
	if err != nil {
		unmap()
		return nil, err
	}
	sf.unmap = unmap
	sf.mapped = mapsFiles && len(data) > 0
	return sf, nil
}

// rawInfo is a header entry as stored.
type rawInfo struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// Parse parses a whole safetensors file held in data; name appears in
// errors. The returned tensors alias data.
func Parse(name string, data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%s: %d bytes is too short for a safetensors file", name, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%s: header length %d does not fit in the file (%d bytes): truncated or not safetensors", name, n, len(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	body := data[8+n:]
	sf := &File{Name: name, tensors: make(map[string]*Info, len(raw)), data: data}
	for k, v := range raw {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &sf.Metadata); err != nil {
				return nil, fmt.Errorf("%s: __metadata__: %w", name, err)
			}
			continue
		}
		var ri rawInfo
		if err := json.Unmarshal(v, &ri); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", name, k, err)
		}
		dt, err := tensor.ParseDType(ri.DType)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", name, k, err)
		}
		if len(ri.Offsets) != 2 {
			return nil, fmt.Errorf("%s: tensor %s: data_offsets has %d entries, want 2", name, k, len(ri.Offsets))
		}
		elems := int64(1)
		for _, d := range ri.Shape {
			if d < 0 || (d > 0 && elems > (1<<62)/int64(d)) {
				return nil, fmt.Errorf("%s: tensor %s: bad shape %v", name, k, ri.Shape)
			}
			elems *= int64(d)
		}
		start, end := ri.Offsets[0], ri.Offsets[1]
		if start < 0 || end < start {
			return nil, fmt.Errorf("%s: tensor %s: bad data_offsets [%d, %d]", name, k, start, end)
		}
		if want := elems * int64(dt.Size()); end-start != want {
			return nil, fmt.Errorf("%s: tensor %s: %d bytes for %s %v, want %d", name, k, end-start, ri.DType, ri.Shape, want)
		}
		if end > int64(len(body)) {
			return nil, fmt.Errorf("%s: tensor %s: data ends at byte %d of %d: the file is truncated", name, k, end, len(body))
		}
		sf.tensors[k] = &Info{Name: k, DType: dt, Shape: ri.Shape, Data: body[start:end:end]}
	}
	return sf, nil
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.tensors))
	for k := range f.tensors {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Tensor returns the named tensor, or nil if the file lacks it.
func (f *File) Tensor(name string) *Info { return f.tensors[name] }

// Bytes returns the whole file as mapped (or read); it must not be written.
func (f *File) Bytes() []byte { return f.data }

// Mapped reports whether Bytes is a memory mapping of the file (Open on
// Unix), which stays mapped until Close; it is false for bytes given to
// Parse and where files are read instead.
func (f *File) Mapped() bool { return f.mapped }

// Release tells the system that b, the bytes of tensors taken from this
// file that nothing will read again (a weight converted to another form),
// need not stay in memory: where the file is mapped, the pages wholly
// inside b leave the process's resident set (the file's bytes stay mapped
// and are read back if touched). It does nothing for bytes that are not
// part of the mapping, or where the file is not mapped.
func (f *File) Release(b []byte) error {
	if !f.mapped || len(b) == 0 || !f.holds(b) {
		return nil
	}
	if err := release(b); err != nil {
		return fmt.Errorf("%s: release %d bytes: %w", f.Name, len(b), err)
	}
	return nil
}

// holds reports whether b lies inside the file's bytes.
func (f *File) holds(b []byte) bool {
	if len(f.data) == 0 || len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(f.data))
}

// Size returns the size of the file in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Close unmaps the file (if Open mapped it). Tensors taken from it must not be
// used afterwards.
func (f *File) Close() error {
	f.tensors = nil
	f.data = nil
	if f.unmap != nil {
		u := f.unmap
		f.unmap = nil
		return u()
	}
	return nil
}
