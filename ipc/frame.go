package ipc

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// DefaultFrameLimit is the largest frame body accepted unless configured
// otherwise: 64 MiB.
const DefaultFrameLimit = 64 << 20

// eagerAlloc is the body size up to which a frame's buffer is allocated at
// once; larger bodies grow as their bytes actually arrive, so a peer cannot
// make us allocate by announcing a large frame and sending nothing.
const eagerAlloc = 1 << 20

// readHeader reads a frame's 4-byte big-endian length and checks it against
// limit before anything is allocated.
func readHeader(r io.Reader, limit int) (int, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if uint64(n) > uint64(limit) {
		return 0, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, limit)
	}
	return int(n), nil
}

// readBody reads a frame body of n bytes.
func readBody(r io.Reader, n int) ([]byte, error) {
	if n <= eagerAlloc {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, truncated(err)
		}
		return b, nil
	}
	// Grow with what arrives, doubling up to exactly n: a peer that
	// announces a large frame and sends little costs little, and the body
	// costs at most twice its size in allocations.
	b := make([]byte, 0, eagerAlloc)
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, 2*cap(b)))
			copy(nb, b)
			b = nb
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil && len(b) < n {
			return nil, truncated(err)
		}
	}
	return b, nil
}

// truncated turns the EOF of a frame cut short into io.ErrUnexpectedEOF.
func truncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadFrame reads one frame (a 4-byte big-endian body length, then the
// body) and returns its body. A length above limit returns an error wrapping
// [ErrFrameTooLarge] without reading or allocating the body; a stream that
// ends inside a frame returns io.ErrUnexpectedEOF, one that ends cleanly
// before a frame io.EOF.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	n, err := readHeader(r, limit)
	if err != nil {
		return nil, err
	}
	return readBody(r, n)
}

// AppendFrame appends body to dst as one frame.
func AppendFrame(dst, body []byte) ([]byte, error) {
	if len(body) > math.MaxUint32 {
		return dst, fmt.Errorf("%w: body of %d bytes", ErrFrameTooLarge, len(body))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...), nil
}

// WriteFrame writes body as one frame in a single Write call.
func WriteFrame(w io.Writer, body []byte) error {
	b, err := AppendFrame(make([]byte, 0, 4+len(body)), body)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
