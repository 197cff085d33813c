package model_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/model/modeltest"
)

// TestInt8Resident checks the memory goal of int8 models on a mapped bf16
// checkpoint, on Linux, where /proc/self/smaps gives the resident bytes of
// the checkpoint's mapping. A float model after a forward pass has its
// projections' pages resident; an int8 model, after its load (which reads
// every projection to convert it) and a forward pass, has at most the other
// tensors' pages resident, and the heap it added holds the int8 weights:
// about half the projections' bf16 bytes.
func TestInt8Resident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the resident size of a mapping is read from /proc/self/smaps")
	}
	if testing.Short() {
		t.Skip("measures the resident set")
	}
	c := modeltest.Qwen35Small(4)
	c.Hidden, c.Intermediate, c.Vocab = 512, 2048, 1000
	c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 4, 1, 128, 32
	c.NK, c.NV, c.DK, c.DV = 4, 4, 128, 128
	dir := t.TempDir()
	if _, err := modeltest.Write(dir, c, modeltest.Options{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "model.safetensors")
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{1, 17, 300, 999, 42, 7, 512, 3}
	forward := func(m *model.Model) { // every layer, the last one's MLP included
		if _, err := m.Forward(context.Background(), []model.Row{{IDs: ids, Gather: []int{len(ids) - 1}}}, nil); err != nil {
			t.Fatal(err)
		}
	}

	fl, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forward(fl)
	projBF16, floatMapped := fl.ProjectionBytes(), mappedRSS(t, file)
	fl.Close()
	if floatMapped < projBF16 {
		t.Fatalf("the float model has %d bytes of its checkpoint resident, less than its projections' %d: the measure cannot tell", floatMapped, projBF16)
	}
	others := st.Size() - projBF16 // every byte of the file that is not a projection's

	var a, b runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&a)
	q, err := model.Load(dir, be, model.LoadOptions{Int8: &model.Int8Options{}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&b)
	heap := int64(b.HeapAlloc) - int64(a.HeapAlloc)
	loaded := mappedRSS(t, file)
	forward(q)
	served := mappedRSS(t, file)
	int8Bytes := q.ProjectionBytes()
	t.Logf("checkpoint %d bytes, projections %d in bf16; float model: %d mapped bytes resident; int8 model: %d mapped (loaded), %d (after a forward pass), heap +%d, int8 projections %d (%.3f× bf16)",
		st.Size(), projBF16, floatMapped, loaded, served, heap, int8Bytes, float64(int8Bytes)/float64(projBF16))

	// A page another tensor shares, or one mapped again around a fault on
	// a neighbour (the kernel maps cached pages up to 64 KiB around a
	// fault), may stay: an eighth of the projections' bytes covers those.
	slack := projBF16 / 8
	for _, m := range []struct {
		when string
		rss  int64
	}{{"loaded", loaded}, {"after a forward pass", served}} {
		if m.rss > others+slack {
			t.Errorf("int8 model %s: %d bytes of the checkpoint resident, want at most the other tensors' %d (+%d): the float projections stayed", m.when, m.rss, others, slack)
		}
	}
	if float64(int8Bytes) > 0.55*float64(projBF16) {
		t.Errorf("int8 projections %d bytes, want ≤ 0.55× bf16's %d", int8Bytes, projBF16)
	}
	if heap > int8Bytes+slack {
		t.Errorf("the int8 load added %d heap bytes, want about its int8 projections' %d", heap, int8Bytes)
	}
}

// mappedRSS returns the resident bytes of the mappings of path, from
// /proc/self/smaps.
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	in, found := false, false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && f[len(f)-1] == path
			found = found || in
			continue
		}
		if in && f[0] == "Rss:" && len(f) >= 2 {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += kb << 10
		}
	}
	if !found {
		t.Fatalf("no mapping of %s in /proc/self/smaps", path)
	}
	return total
}
