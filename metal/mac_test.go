//go:build mactest && darwin && arm64

package metal

import (
	"context"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/model"
)

// TestMacDevice checks what the GPU reports against what Apple Silicon
// must report: a name, an Apple GPU family of 7 (M1) or later, a working
// set, a largest buffer of at least 256 MB (MTLDevice.h), unified memory,
// and a kernel library that compiles.
func TestMacDevice(t *testing.T) {
	info, err := Describe(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device %q, families %v, recommendedMaxWorkingSetSize %d, maxBufferLength %d, unified %v",
		info.Name, info.Families, info.RecommendedMaxWorkingSetSize, info.MaxBufferLength, info.UnifiedMemory)
	if info.LibraryErr != "" {
		t.Fatalf("the kernel library does not compile: %s", info.LibraryErr)
	}
	if info.Name == "" || info.RecommendedMaxWorkingSetSize == 0 || info.MaxBufferLength < 256<<20 || !info.UnifiedMemory {
		t.Errorf("implausible device report: %+v", info)
	}
	apple := false
	for _, f := range info.Families {
		if strings.HasPrefix(f, "Apple") && f >= "Apple7" || f == "Apple10" {
			apple = true
		}
	}
	if !apple {
		t.Errorf("families %v: want Apple7 or later", info.Families)
	}
	if p := os.Getpagesize(); p != 16384 {
		t.Errorf("page size %d, want 16384 on Apple Silicon", p)
	}
}

// TestMacPlacement holds the driver's placement to the device: an mmap'd
// checkpoint is wrapped as one no-copy region (mmap starts on a 16 KiB
// page) and its weights are offsets into it; the demo model read by LoadFS
// never reaches MapRegion, and a misaligned heap region is declined. The
// forward passes are checked by TestModelGoldens.
func TestMacPlacement(t *testing.T) {
	ctx := context.Background()
	be, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*Backend)
	defer b.Close()
	pl := &b.drv.(*mtlDriver).place
	m, err := model.Load("../testdata/tiny-qwen35", be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Forward(ctx, []model.Row{{IDs: []int32{1, 2, 3}, Gather: []int{2}}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(pl.regions) != 1 || len(pl.declined) != 0 || pl.inRegion == 0 || pl.copied != 0 {
		t.Errorf("mmap'd checkpoint: %d regions, declined %v, %d weights in the region, %d copied", len(pl.regions), pl.declined, pl.inRegion, pl.copied)
	}
	md, err := model.LoadFS(startlux.DemoModel(), "demo", be, model.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadFS of the demo model: %v", err)
	}
	defer md.Close()
	before := pl.copied
	if _, err := md.Forward(ctx, []model.Row{{IDs: []int32{1, 2, 3}, Gather: []int{2}}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(pl.regions) != 1 || pl.copied == before {
		t.Errorf("demo model: %d regions (want the first checkpoint's only), %d weights copied", len(pl.regions), pl.copied-before)
	}
	heap := make([]byte, 1<<20)
	off := 8
	for uintptr(unsafe.Pointer(&heap[off]))%16384 == 0 {
		off += 8
	}
	if err := b.MapRegion(heap[off:]); err != nil || len(pl.declined) != 1 {
		t.Errorf("misaligned heap region: %v, declined %v", err, pl.declined)
	}
}
