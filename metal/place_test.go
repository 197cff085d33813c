package metal

import (
	"strings"
	"testing"
)

// The page sizes and buffer limits of real devices: Apple Silicon macOS
// pages are 16 KiB, Intel and Linux 4 KiB; maxBufferLength is at least
// 256 MB and on Apple Silicon some GB.
var (
	apple = deviceLimits{pageSize: 16384, maxBuffer: 8 << 30}
	small = deviceLimits{pageSize: 16384, maxBuffer: 1 << 20}
)

func TestPlanRegion(t *testing.T) {
	cases := []struct {
		name   string
		start  uintptr
		n      int
		lim    deviceLimits
		size   int
		reason string // a substring; "" when the region is wrapped
	}{
		{"whole pages", 0x10000_0000, 4 * 16384, apple, 4 * 16384, ""},
		{"partial last page rounds up", 0x10000_0000, 4*16384 + 1, apple, 5 * 16384, ""},
		{"one byte", 0x4000, 1, apple, 16384, ""},
		// Go heap pages are 8 KiB: a heap copy is 16 KiB-aligned only by
		// chance, and must never fail the load.
		{"8 KiB-aligned heap copy", 0x10000_2000, 4 << 20, apple, 0, "not aligned to the 16384-byte page"},
		{"4 KiB page system", 0x10000_1000, 8192, deviceLimits{pageSize: 4096}, 8192, ""},
		{"exactly the largest buffer", 0x4000, 1 << 20, small, 1 << 20, ""},
		{"larger than the largest buffer", 0x4000, 1<<20 + 1, small, 1<<20 + 16384, "exceeds the device's largest buffer (1048576 bytes)"},
		{"page rounding crosses the limit", 0x4000, 1<<20 - 100, deviceLimits{pageSize: 16384, maxBuffer: 1<<20 - 50}, 1 << 20, "exceeds"},
		{"empty", 0x4000, 0, apple, 0, "empty"},
		{"no page size", 0x4000, 10, deviceLimits{}, 0, "page size unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planRegion(c.start, c.n, c.lim)
			if c.reason == "" {
				if p.reason != "" || p.size != c.size {
					t.Errorf("got size %d, reason %q; want size %d, wrapped", p.size, p.reason, c.size)
				}
				if p.size%c.lim.pageSize != 0 || p.size < c.n {
					t.Errorf("size %d is not whole pages covering %d bytes", p.size, c.n)
				}
				return
			}
			if !strings.Contains(p.reason, c.reason) {
				t.Errorf("reason %q, want it to contain %q", p.reason, c.reason)
			}
		})
	}
}

// TestPlanRegionAlignedFraction: over many starts on an 8 KiB grid (the Go
// heap's page), half are 16 KiB-aligned; every other one is declined with a
// reason, none fails.
func TestPlanRegionAlignedFraction(t *testing.T) {
	wrapped := 0
	for i := range 40 {
		p := planRegion(uintptr(0xc000000000+i*8192), 4<<20, apple)
		switch {
		case p.reason == "":
			wrapped++
		case !strings.Contains(p.reason, "not aligned"):
			t.Fatalf("start %d: unexpected reason %q", i, p.reason)
		}
	}
	if wrapped != 20 {
		t.Errorf("%d of 40 starts wrapped, want 20", wrapped)
	}
}

func TestPlanWeight(t *testing.T) {
	regions := []span{{0x10000, 0x20000}, {0x40000, 0x48000}}
	cases := []struct {
		name    string
		p       uintptr
		n       int
		align   int
		lim     deviceLimits
		region  int
		off     int
		errPart string
	}{
		{"inside the first region", 0x10010, 64, 4, apple, 0, 0x10, ""},
		{"at the start of the second", 0x40000, 0x8000, 2, apple, 1, 0, ""},
		{"ends exactly at the end", 0x1ff00, 0x100, 4, apple, 0, 0xff00, ""},
		{"runs past the end: copied", 0x1ff00, 0x101, 1, apple, -1, 0, ""},
		{"outside every region: copied", 0x30000, 64, 4, apple, -1, 0, ""},
		{"offset misaligned for f32: copied", 0x10002, 64, 4, apple, -1, 0, ""},
		{"offset aligned for bf16", 0x10002, 64, 2, apple, 0, 2, ""},
		{"align 0 means bytes", 0x10003, 1, 0, apple, 0, 3, ""},
		{"copy within the largest buffer", 0x90000, 1 << 20, 4, small, -1, 0, ""},
		{"copy beyond the largest buffer", 0x90000, 1<<20 + 4, 4, small, -1, 0, "exceeds the device's largest buffer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i, off, err := planWeight(c.p, c.n, c.align, regions, c.lim)
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("err %v, want one containing %q", err, c.errPart)
				}
				return
			}
			if err != nil || i != c.region || off != c.off {
				t.Errorf("got region %d offset %#x err %v; want region %d offset %#x", i, off, err, c.region, c.off)
			}
		})
	}
}

func TestCheckBuffer(t *testing.T) {
	if err := checkBuffer(1<<20, small); err != nil {
		t.Errorf("a buffer of the largest size: %v", err)
	}
	if err := checkBuffer(1<<20+1, small); err == nil {
		t.Error("a buffer one byte too large was allowed")
	}
	if err := checkBuffer(1<<40, deviceLimits{pageSize: 4096}); err != nil {
		t.Errorf("no limit known: %v", err)
	}
}
