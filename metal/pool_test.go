package metal

import (
	"context"
	"math"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// TestPoolReuse checks the pool's rules on the backend under test: a
// buffer freed while work is queued is not handed out again before that
// work has run; after a Sync it is; under the emulator a reused buffer
// reads as NaN (it was scrubbed: a use after Free shows); and the pool
// never holds more than its limit, dropping the least recently freed
// buffers first.
func TestPoolReuse(t *testing.T) {
	be, err := openUnderTest()
	if err != nil {
		deviceUnderTest(t) // skips or fails as the other tests do
		t.Fatal(err)
	}
	b := be.(*Backend)
	defer b.Close()
	const n = 1024
	b.SetPoolLimit(3 * 4 * n) // three buffers of n floats
	ctx := context.Background()
	src, dst := b.Alloc(n), b.Alloc(n)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	b.Write(src, 0, ones)
	b.Copy(dst, 0, n, src, 0, n, 1, n) // queued
	srcBuf := tn(src).buf
	b.Free(src) // queued work reads it: it must wait
	other := b.Alloc(n)
	if tn(other).buf == srcBuf {
		t.Fatal("a buffer freed while work on it was queued was handed out again")
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := b.Read(ctx, dst, 0, got); err != nil || got[0] != 1 || got[n-1] != 1 {
		t.Fatalf("the copy read %v, %v: the source was reused before it ran", got[:2], err)
	}
	again := b.Alloc(n)
	if tn(again).buf != srcBuf {
		t.Error("after Sync the freed buffer was not reused (the most recently freed of its size is taken first)")
	}
	if b.Name() == "metal-emu" {
		b.Read(ctx, again, 0, got)
		if !math.IsNaN(float64(got[0])) {
			t.Errorf("a reused buffer reads %v, want NaN (scrubbed when freed)", got[0])
		}
	}
	// Five buffers of n floats freed against a limit of three: the first
	// two freed go.
	bufs := []tensor.Tensor{again, dst, other, b.Alloc(n), b.Alloc(n)}
	var ids []buffer
	for _, x := range bufs {
		ids = append(ids, tn(x).buf)
		b.Free(x)
	}
	if held, limit := b.PoolStats(); held != 3*4*n || limit != 3*4*n {
		t.Errorf("the pool holds %d bytes, limit %d; want %d of %d", held, limit, 3*4*n, 3*4*n)
	}
	for k := 4; k >= 2; k-- { // the kept ones come back, most recent first
		if x := b.Alloc(n); tn(x).buf != ids[k] {
			t.Errorf("Alloc %d did not return buffer %d freed last but %d", 4-k, k, 4-k)
		}
	}
	if x := b.Alloc(n); tn(x).buf == ids[0] || tn(x).buf == ids[1] {
		t.Error("a buffer dropped from the pool came back")
	}
}
