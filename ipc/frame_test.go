package ipc

import (
	"bytes"
	"io"
	"testing"
)

// TestFrameAllocs holds the frame layer to its allocation budget: a frame
// appended to a buffer with room allocates nothing, writing one allocates
// its one buffer (header and body go out in a single Write), and reading
// one allocates only the body it returns (and the header's four bytes,
// which escape through the io.Reader), whatever the body's size below
// the eager limit.
func TestFrameAllocs(t *testing.T) {
	for _, n := range []int{0, 300, 64 << 10} {
		body := bytes.Repeat([]byte{0xa5}, n)
		dst := make([]byte, 0, 4+n)
		if got := testing.AllocsPerRun(50, func() {
			if _, err := AppendFrame(dst[:0], body); err != nil {
				t.Fatal(err)
			}
		}); got != 0 {
			t.Errorf("AppendFrame of %d bytes: %v allocations, want 0", n, got)
		}
		if got := testing.AllocsPerRun(50, func() {
			if err := WriteFrame(io.Discard, body); err != nil {
				t.Fatal(err)
			}
		}); got > 1 {
			t.Errorf("WriteFrame of %d bytes: %v allocations, want at most 1", n, got)
		}
		frame, _ := AppendFrame(nil, body)
		r := bytes.NewReader(frame)
		budget := 2.0
		if n == 0 {
			budget = 1 // make([]byte, 0) does not allocate
		}
		if got := testing.AllocsPerRun(50, func() {
			r.Reset(frame)
			got, err := ReadFrame(r, DefaultFrameLimit)
			if err != nil || len(got) != n {
				t.Fatalf("ReadFrame: %d bytes, %v", len(got), err)
			}
		}); got > budget {
			t.Errorf("ReadFrame of %d bytes: %v allocations, want at most %v", n, got, budget)
		}
	}
}
