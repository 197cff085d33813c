//go:build !mactest

// The emulator's own tests; with -tags mactest (the GPU under test) they
// are left out.

package metal

import (
	"context"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
)

// These tests run the GPU driver's placement decisions (place.go) through
// the emulator: a checkpoint mmap'd by model.Load is wrapped as one region
// and its weights are served as offsets into it, or, when the device could
// not wrap it, copied; either way the forward pass matches the goldens, and
// the two ways give the same bits. The embedded demo model, read into the
// Go heap by LoadFS, never reaches MapRegion and loads whatever its
// address.

func emulatedLimits(t *testing.T, lim deviceLimits) (*Backend, *placement) {
	t.Helper()
	be, err := newEmulatedLimits(context.Background(), Options{}, lim)
	if err != nil {
		t.Fatalf("emulated backend: %v", err)
	}
	return be, be.drv.(*emuDriver).place
}

func TestPlacementMappedCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("forward passes through the emulator")
	}
	const dir = "../testdata/tiny-qwen35"
	st, err := os.Stat(dir + "/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	var g *goldens.Forward
	for _, f := range goldens.Forwards(t, "../testdata/goldens/tiny-qwen35.goldens.safetensors", 0) {
		if f.Name == "rand1" {
			g = &f
		}
	}
	if g == nil {
		t.Fatal("no case rand1 in the goldens")
	}
	// An mmap starts on the host's page, as it does on a Mac (16 KiB).
	page := os.Getpagesize()
	cases := []struct {
		name     string
		lim      deviceLimits
		regions  int
		declined string // a substring of the one reason, or ""
	}{
		{"wrapped", deviceLimits{pageSize: page, maxBuffer: 1 << 30}, 1, ""},
		// Larger than the largest buffer (but every weight fits): declined,
		// every weight copied.
		{"larger than maxBufferLength", deviceLimits{pageSize: page, maxBuffer: int(st.Size()) / 2}, 0, "exceeds the device's largest buffer"},
	}
	var logits [][]float32
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be, pl := emulatedLimits(t, c.lim)
			m, err := model.Load(dir, be, model.LoadOptions{})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			defer m.Close()
			if len(pl.regions) != c.regions {
				t.Errorf("%d regions wrapped, want %d", len(pl.regions), c.regions)
			}
			switch {
			case c.declined == "" && len(pl.declined) > 0:
				t.Errorf("declined: %v", pl.declined)
			case c.declined != "" && (len(pl.declined) != 1 || !strings.Contains(pl.declined[0], c.declined)):
				t.Errorf("declined %v, want one reason containing %q", pl.declined, c.declined)
			}
			T := len(g.IDs)
			lg, err := m.Forward(context.Background(), []model.Row{{IDs: g.IDs, Gather: []int{T - 1}}}, m.Head())
			if err != nil {
				t.Fatal(err)
			}
			if r := goldens.MaxRel(lg[0], g.Logits, len(g.Logits)); r > 1e-4 {
				t.Errorf("logits: relative error %.2e against the goldens", r)
			}
			if c.regions > 0 && (pl.inRegion == 0 || pl.copied > 0) {
				t.Errorf("%d weights served from the region, %d copied; want all from the region", pl.inRegion, pl.copied)
			}
			if c.regions == 0 && (pl.inRegion > 0 || pl.copied == 0) {
				t.Errorf("%d weights served from a region, %d copied; want all copied", pl.inRegion, pl.copied)
			}
			logits = append(logits, lg[0])
		})
	}
	if len(logits) == 2 {
		for i := range logits[0] {
			if logits[0][i] != logits[1][i] {
				t.Fatalf("logit %d: %v from the region, %v from copies; the same kernels on the same bytes must agree exactly", i, logits[0][i], logits[1][i])
			}
		}
	}
}

// TestPlacementDemoModelFS loads the embedded demo model through LoadFS on
// a backend with Apple Silicon's 16 KiB pages: its bytes are on the Go heap
// (8 KiB pages, so 16 KiB-aligned only by chance), they never reach
// MapRegion, every weight is copied, and the forward pass agrees with the
// CPU backend. A heap slice handed to MapRegion anyway is declined, not an
// error.
func TestPlacementDemoModelFS(t *testing.T) {
	if testing.Short() {
		t.Skip("a forward pass through the emulator")
	}
	be, pl := emulatedLimits(t, deviceLimits{pageSize: 16384, maxBuffer: 1 << 30})
	m, err := model.LoadFS(startlux.DemoModel(), "demo", be, model.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadFS on a 16 KiB-page device: %v", err)
	}
	defer m.Close()
	if len(pl.regions) != 0 || len(pl.declined) != 0 {
		t.Errorf("regions %d, declined %v: want heap bytes never to reach MapRegion", len(pl.regions), pl.declined)
	}
	heap := make([]byte, 64<<10)
	off := 8
	for uintptr(unsafe.Pointer(&heap[off]))%16384 == 0 {
		off += 8
	}
	if err := be.MapRegion(heap[off:]); err != nil {
		t.Errorf("MapRegion of a misaligned heap slice failed: %v", err)
	}
	if len(pl.declined) != 1 || !strings.Contains(pl.declined[0], "not aligned") || len(pl.regions) != 0 {
		t.Errorf("misaligned region: declined %v, %d regions; want it declined for its alignment", pl.declined, len(pl.regions))
	}

	ref, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := model.LoadFS(startlux.DemoModel(), "demo", ref, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	ids := []int32{1, 17, 300, 2048, 99, 7}
	rows := []model.Row{{IDs: ids, Gather: []int{0, len(ids) - 1}}}
	got, err := m.Forward(context.Background(), rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := mc.Forward(context.Background(), rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := goldens.MaxRel(got[0], want[0], m.Config.Hidden); r > 1e-4 {
		t.Errorf("final hidden states: relative error %.2e per position against the CPU backend", r)
	}
	// Weights are placed when first used.
	if pl.inRegion != 0 || pl.copied == 0 {
		t.Errorf("%d weights served from a region, %d copied; want every weight copied", pl.inRegion, pl.copied)
	}
}

var _ tensor.RegionMapper = (*Backend)(nil)
