package safetensors

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

func TestRoundTrip(t *testing.T) {
	big := make([]byte, 3*5*2)
	for i := range big {
		big[i] = byte(i * 7)
	}
	ents := []Entry{
		F32("a", []int{2, 2}, []float32{1, -2, 3.5, float32(math.Inf(1))}),
		{Name: "b", DType: tensor.BF16, Shape: []int{3, 5}, Stream: func(w io.Writer) error {
			_, err := w.Write(big)
			return err
		}},
		{Name: "scalar", DType: tensor.I32, Shape: nil, Data: []byte{1, 0, 0, 0}},
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(path, ents, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := strings.Join(f.Names(), ","); got != "a,b,scalar" {
		t.Fatalf("names %q", got)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	a := f.Tensor("a").Weight().Float32s()
	if a[0] != 1 || a[1] != -2 || a[2] != 3.5 || !math.IsInf(float64(a[3]), 1) {
		t.Errorf("a = %v", a)
	}
	if b := f.Tensor("b"); !bytes.Equal(b.Data, big) || b.DType != tensor.BF16 || b.Elems() != 15 {
		t.Errorf("b = %v %v", b.DType, b.Shape)
	}
	if s := f.Tensor("scalar"); s.Elems() != 1 || len(s.Data) != 4 {
		t.Errorf("scalar %v", s.Shape)
	}
	// The header is padded to 8 bytes, so data starts aligned.
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
}

func TestWriteRejects(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, []Entry{{Name: "x", DType: tensor.F32, Shape: []int{3}, Data: make([]byte, 8)}}, nil); err == nil || !strings.Contains(err.Error(), "want 12") {
		t.Errorf("size mismatch: %v", err)
	}
	if err := Write(&buf, []Entry{F32("x", []int{1}, []float32{1}), F32("x", []int{1}, []float32{1})}, nil); err == nil {
		t.Error("duplicate name accepted")
	}
}

func header(h string, body int) []byte {
	b := make([]byte, 8, 8+len(h)+body)
	binary.LittleEndian.PutUint64(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, make([]byte, body)...)
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte{1, 2}, "too short"},
		{"header too long", header(`{}`, 0)[:9], "header length"},
		{"bad json", header(`{"a":`, 0), "header"},
		{"bad dtype", header(`{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, 1), "unsupported dtype"},
		{"size mismatch", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8), "want 8"},
		{"outside", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 8), "truncated"},
		{"negative", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, 8), "bad data_offsets"},
		{"bad shape", header(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 8), "bad shape"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.safetensors", c.data)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.safetensors") {
				t.Errorf("error %q lacks %q or the file name", err, c.want)
			}
		})
	}
	if _, err := Parse("ok", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)); err != nil {
		t.Errorf("valid file refused: %v", err)
	}
}

// TestMapped: a file Open maps is reported as mapped and starts on a page
// (what a GPU backend needs to wrap it without a copy); bytes handed to
// Parse are not mapped, whatever their address.
func TestMapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := WriteFile(path, []Entry{F32("w", []int{3}, []float32{1, 2, 3})}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Mapped() != mapsFiles {
		t.Errorf("Open: Mapped() = %v, want %v on this system", f.Mapped(), mapsFiles)
	}
	if f.Mapped() {
		if p := uintptr(unsafe.Pointer(&f.Bytes()[0])); p%uintptr(os.Getpagesize()) != 0 {
			t.Errorf("mapping at %#x is not page-aligned", p)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("m", raw)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mapped() {
		t.Error("Parse: Mapped() = true for bytes read into memory")
	}
}

// TestRelease checks on Linux, through the mapping's resident size in
// /proc/self/smaps, that Release drops a tensor's pages from the resident
// set, that the bytes read the same afterwards, and that bytes outside the
// mapping are left alone.
func TestRelease(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the resident size of one mapping is read from /proc/self/smaps")
	}
	const n = 8 << 20 // float32 elements: 32 MiB
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i % 1000)
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	if err := WriteFile(path, []Entry{F32("small", []int{3}, []float32{1, 2, 3}), F32("big", []int{n}, v)}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	big := f.Tensor("big").Data
	sum := func() (s uint64) {
		for _, b := range big {
			s += uint64(b)
		}
		return s
	}
	before := sum()
	start := uintptr(unsafe.Pointer(&f.Bytes()[0]))
	if rss := mappingRSS(t, start); rss < 30<<20 {
		t.Fatalf("after reading the tensor the mapping has %d resident bytes, want ≥ 30 MiB", rss)
	}
	if err := f.Release(make([]byte, 1<<20)); err != nil { // not part of the file: ignored
		t.Fatal(err)
	}
	if err := f.Release(big); err != nil {
		t.Fatal(err)
	}
	if rss := mappingRSS(t, start); rss > 1<<20 {
		t.Errorf("after Release the mapping has %d resident bytes, want at most the pages the tensor shares", rss)
	}
	if after := sum(); after != before || f.Tensor("small").Weight().Float32s()[2] != 3 {
		t.Errorf("the bytes changed after Release: sum %d, was %d", after, before)
	}
}

// mappingRSS returns the resident bytes of the mapping that starts at addr,
// from /proc/self/smaps.
func mappingRSS(t *testing.T, addr uintptr) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if lo, _, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			a, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && uintptr(a) == addr
			continue
		}
		if in && f[0] == "Rss:" && len(f) >= 2 {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", addr)
	return 0
}
