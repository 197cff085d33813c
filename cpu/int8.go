package cpu

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/startlux/startlux/tensor"
)

// Int8 matrix products (W8A8). MatMul over an int8 weight (tensor.I8)
// follows the arithmetic of tensor's int8.go exactly: the activation rows
// are quantised per row, a kernel computes the int32 dot products, and the
// float32 epilogue rescales. Every kernel gives the same int32 results as
// the portable Go loop, so the outputs do not depend on the kernel.
//
// A kernel multiplies a register tile of mr activation rows by nr weight
// channels over k columns, k a multiple of its vector width kv, both
// operands row-major (the weight in its stored [O, I] layout: nothing is
// repacked), and writes the mr×nr sums. The driver (int8Block) blocks the
// product for the caches: a task takes a block of up to int8RowBlock rows
// and int8ChanBlock channels and runs over K in blocks of int8KBlock
// columns; inside, each row tile (mr rows × kc columns, in L1) meets every
// channel tile of the block (nr channels × kc, the block in L2).
//
// The kernels, best first:
//
//   - avx512-vnni (amd64, AVX-512 VNNI): vpdpbusd, u8 × s8 in 4-way int32
//     dot products, a 4×6 tile of 64-byte vectors. The activations are
//     offset to unsigned (u = q + 128, stored so by the quantiser) and each
//     sum corrected by 128·Σw of its channel (tensor.Int8.Sums).
//   - avx2 (amd64, AVX2): vpmaddubsw/vpmaddwd on a 3×3 tile of 32-byte
//     vectors. vpmaddubsw multiplies unsigned by signed bytes and adds pairs
//     into int16 with saturation; it is fed |w| (unsigned, 0..128) and x with
//     w's sign (vpsignb, |x| ≤ 127), so a pair sum is at most 2·128·127 =
//     32512 < 32767 in magnitude and never saturates, for any weight in
//     [−128, 127] and activations in [−127, 127] (which the quantiser
//     guarantees); vpmaddwd against ones widens the pairs to int32.
//   - neon-sdot (arm64, dot product extension): sdot, s8 × s8 in 4-way int32
//     dot products, a 4×4 tile of 16-byte vectors.
//   - go: the portable loop, the reference the others are held to and the
//     fallback everywhere.
//
// The kernel is chosen when the backend is made: the best this CPU runs, or
// the one named by Options.Int8Kernel or the STARTLUX_INT8_KERNEL
// environment variable (avx512vnni, avx2, sdot, go).

// int8Kernel is one implementation of the int8 tile.
type int8Kernel struct {
	name   string // for status: "avx512-vnni", "avx2", "neon-sdot", "go"
	env    string // its STARTLUX_INT8_KERNEL value
	mr, nr int    // register tile: activation rows × weight channels
	kv     int    // columns per vector step
	offset bool   // activations stored as u8 = q + 128
	ok     bool   // runs on this CPU
	// tile sets c[r·nr + j] = Σ_{i<k} a[r·lda + i]·w[j·ldw + i] for r < mr,
	// j < nr, with a in the kernel's activation form and w int8; k is a
	// positive multiple of kv.
	tile func(k int, a []byte, lda int, w []byte, ldw int, c []int32)
	// panel, where not nil, runs nt tiles side by side, the channels of
	// tile t at w[t·nr·ldw:], and accumulates in place: for r < mr and
	// j < nt·nr it sets c[r·ldc + j] to Σ_{i<k} a[r·lda + i]·w[j·ldw + i],
	// or with add adds that sum to it (wrapping int32). Without it the
	// driver runs tile and adds in Go.
	panel func(k int, a []byte, lda int, w []byte, ldw, nt int, c []int32, ldc int, add bool)
}

// Int8KernelEnv is the environment variable that names the int8 kernel.
const Int8KernelEnv = "STARTLUX_INT8_KERNEL"

// goInt8 is the portable kernel.
var goInt8 = int8Kernel{name: "go", env: "go", mr: 2, nr: 4, kv: 1, ok: true, tile: int8TileGo}

// int8Kernels returns every kernel of this architecture, best first, the
// portable one last.
func int8Kernels() []int8Kernel { return append(archInt8Kernels(), goInt8) }

// int8KernelChoices lists the STARTLUX_INT8_KERNEL values of every
// architecture.
var int8KernelChoices = []string{"avx512vnni", "avx2", "sdot", "go"}

// chooseInt8 returns the kernel named by choice (a STARTLUX_INT8_KERNEL
// value), or for "" the best one this CPU runs.
func chooseInt8(choice string) (*int8Kernel, error) {
	ks := int8Kernels()
	var here []string
	for _, k := range ks {
		if k.ok {
			here = append(here, k.env)
		}
	}
	for i := range ks {
		k := &ks[i]
		if choice == "" && k.ok || choice == k.env {
			if !k.ok {
				return nil, fmt.Errorf("int8 kernel %q: this CPU cannot run it (it runs %s)", choice, strings.Join(here, ", "))
			}
			return k, nil
		}
	}
	if slices.Contains(int8KernelChoices, choice) {
		return nil, fmt.Errorf("int8 kernel %q: not built for this architecture (this CPU runs %s)", choice, strings.Join(here, ", "))
	}
	return nil, fmt.Errorf("unknown int8 kernel %q: want one of %s (this CPU runs %s)", choice, strings.Join(int8KernelChoices, ", "), strings.Join(here, ", "))
}

// int8Choice returns the kernel choice of opts, or of the environment.
func int8Choice(opts Options) (string, string) {
	if opts.Int8Kernel != "" {
		return opts.Int8Kernel, "Options.Int8Kernel"
	}
	return os.Getenv(Int8KernelEnv), Int8KernelEnv
}

// Int8Kernel returns the name of the kernel that runs MatMul over int8
// weights ("avx512-vnni", "avx2", "neon-sdot" or "go"); the CPU backend
// always has one, so the error is nil. It implements tensor.Int8Backend.
func (b *Backend) Int8Kernel() (string, error) { return b.int8.name, nil }

var _ tensor.Int8Backend = (*Backend)(nil)

// Blocking of the int8 product (see the comment at the top). A task's
// weight block (96 channels × 1024 columns) and activation block (96 rows ×
// 1024) fit a core's L2 together. Measured single-threaded on a shared
// 2-core EPYC (Zen 3) with the avx2 kernel, best of 30 calls: 192 rows ×
// 512 channels × 3584 columns ran at 12 GMAC/s with the whole K in one
// block and 45–52 GMAC/s with blocks of 1024 or 2048 columns, about the
// tile's own 62 GMAC/s on L1-resident data.
const (
	int8RowBlock  = 96   // rows per task; a multiple of every kernel's mr
	int8ChanBlock = 96   // channels per task; a multiple of every kernel's nr
	int8KBlock    = 1024 // columns per pass over a block; a multiple of every kv
)

// int8Problem is one int8 product, shared read-only by its tasks.
type int8Problem struct {
	k          *int8Kernel
	rows, o, n int
	a          []byte // activation rows in the kernel's form, lda apart, ≥ rows rounded up to mr
	lda        int
	w          []byte // weight rows ldw apart (the stored bytes, or a padded copy)
	ldw        int
	kp         int // columns the tiles run over: n rounded up to kv
	sums       []int32
	// tail, when not nil, holds the last partial tile of nr channels
	// (starting at channel tail0), zero-padded, ldw apart.
	tail  []byte
	tail0 int
}

// int8Scratch holds one MatMul's buffers, reused across calls.
type int8Scratch struct {
	p    int8Problem
	a    []byte
	rs   []float32
	wpad []byte
}

// int8Task holds one worker's buffers.
type int8Task struct {
	acc []int32
	t   []int32
}

// matMulInt8 is MatMul for an int8 weight.
func (b *Backend) matMulInt8(od, xd []float32, w *tensor.Weight, rows, o, n int) {
	k := b.int8
	s, _ := b.int8Scratch.Get().(*int8Scratch)
	if s == nil {
		s = &int8Scratch{}
	}
	defer b.int8Scratch.Put(s)

	p := s.problem(k, rows, w)
	s.rs = growF(s.rs, rows)
	b.parallelRange(rows, max(1, elemGrain/n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s.rs[r] = quantizeRow(p.a[r*p.lda:(r+1)*p.lda], xd[r*n:(r+1)*n], k.offset)
		}
	})

	nrb := (rows + int8RowBlock - 1) / int8RowBlock
	ncb := (o + int8ChanBlock - 1) / int8ChanBlock
	cs := w.Int8.Scales
	b.parallel(nrb*ncb, func(i int) {
		// Channel-block-major: the workers share a weight block.
		cb, rb := i/nrb, i%nrb
		m0, m1 := rb*int8RowBlock, min(rows, (rb+1)*int8RowBlock)
		c0, c1 := cb*int8ChanBlock, min(o, (cb+1)*int8ChanBlock)
		tk, _ := b.int8Tasks.Get().(*int8Task)
		if tk == nil {
			tk = &int8Task{}
		}
		acc := p.block(tk, m0, m1, c0, c1)
		nc := c1 - c0
		for r := m0; r < m1; r++ {
			int8Out(od[r*o+c0:r*o+c1], acc[(r-m0)*nc:(r-m0+1)*nc], s.rs[r], cs[c0:c1])
		}
		b.int8Tasks.Put(tk)
	})
}

// problem sets up the product of rows activation rows with the int8
// weight w on kernel k in s's buffers: the rows' storage (to be filled by
// quantizeRow; the rows past rows, up to a multiple of mr, are zeroed) and
// the weight's padding.
func (s *int8Scratch) problem(k *int8Kernel, rows int, w *tensor.Weight) *int8Problem {
	o, n := w.Rows(), w.Cols()
	s.p = int8Problem{k: k, rows: rows, o: o, n: n, w: w.Data, ldw: n, sums: w.Int8.Sums}
	p := &s.p
	p.kp = roundUp(n, k.kv)
	p.lda = roundUp(p.kp, 64)
	mp := roundUp(rows, k.mr)
	s.a = grow(s.a, mp*p.lda)
	p.a = s.a
	clear(p.a[rows*p.lda : mp*p.lda])
	s.wpad = p.padWeight(s.wpad)
	return p
}

// padWeight points p.w at a padded copy of the weight when the tiles
// cannot read it in place (in-features not a multiple of kv), or sets up
// p.tail for a last partial channel tile; it returns the (possibly grown)
// buffer it used.
func (p *int8Problem) padWeight(buf []byte) []byte {
	k := p.k
	switch {
	case p.kp != p.n:
		// Rows of kp columns, zero-padded: the padding meets zero
		// activations, so it adds nothing.
		op := roundUp(p.o, k.nr)
		buf = grow(buf, op*p.kp)
		clear(buf)
		for r := range p.o {
			copy(buf[r*p.kp:r*p.kp+p.n], p.w[r*p.n:(r+1)*p.n])
		}
		p.w, p.ldw = buf, p.kp
	case p.o%k.nr != 0:
		p.tail0 = p.o / k.nr * k.nr
		buf = grow(buf, k.nr*p.n)
		clear(buf)
		copy(buf, p.w[p.tail0*p.n:])
		p.tail = buf
	}
	return buf
}

// block computes the int32 products of rows [m0, m1) and channels
// [c0, c1) into tk.acc, row-major with c1−c0 columns, corrected for the
// activation offset, and returns them.
//
// It accumulates whole tiles: tk.acc holds rows rounded up to mr and
// ldc = c1−c0 rounded up to nr columns (the padding rows meet zero
// activations, the padding channels zero weights), and is compacted to
// c1−c0 columns at the end where ldc differs.
func (p *int8Problem) block(tk *int8Task, m0, m1, c0, c1 int) []int32 {
	k := p.k
	nc := c1 - c0
	ldc := roundUp(nc, k.nr)
	tk.acc = growI(tk.acc, roundUp(m1-m0, k.mr)*ldc)
	acc := tk.acc
	// Channel tiles [c0, cw) read the weight in place (or its padded
	// copy, which has rows up to a multiple of nr); a last partial tile
	// at cw reads p.tail.
	cw := c1
	if p.tail != nil && c1 > p.tail0 {
		cw = p.tail0
	}
	nt := (cw - c0 + k.nr - 1) / k.nr
	for k0 := 0; k0 < p.kp; k0 += int8KBlock {
		kc := min(p.kp-k0, int8KBlock)
		add := k0 > 0
		for r := m0; r < m1; r += k.mr {
			a := p.a[r*p.lda+k0:]
			c := acc[(r-m0)*ldc:]
			if nt > 0 {
				k.runPanel(tk, kc, a, p.lda, p.w[c0*p.ldw+k0:], p.ldw, nt, c, ldc, add)
			}
			if cw < c1 {
				k.runPanel(tk, kc, a, p.lda, p.tail[k0:], p.ldw, 1, c[cw-c0:], ldc, add)
			}
		}
	}
	if ldc != nc {
		for r := range m1 - m0 {
			copy(acc[r*nc:(r+1)*nc], acc[r*ldc:r*ldc+nc])
		}
	}
	acc = acc[:(m1-m0)*nc]
	if k.offset {
		// Σ (q+128)·w − 128·Σw, in wrapping int32 arithmetic: exact, as
		// the true sum fits.
		for r := range m1 - m0 {
			row := acc[r*nc : (r+1)*nc]
			for q := range row {
				row[q] -= 128 * p.sums[c0+q]
			}
		}
	}
	return acc
}

// runPanel runs k.panel, or without one k.tile on each of the nt tiles,
// adding in Go (tk.t holds a tile's sums).
func (k *int8Kernel) runPanel(tk *int8Task, kc int, a []byte, lda int, w []byte, ldw, nt int, c []int32, ldc int, add bool) {
	if k.panel != nil {
		k.panel(kc, a, lda, w, ldw, nt, c, ldc, add)
		return
	}
	tk.t = growI(tk.t, k.mr*k.nr)
	t := tk.t
	for jt := range nt {
		k.tile(kc, a, lda, w[jt*k.nr*ldw:], ldw, t)
		for tr := range k.mr {
			dst := c[tr*ldc+jt*k.nr : tr*ldc+(jt+1)*k.nr]
			src := t[tr*k.nr : (tr+1)*k.nr]
			if add {
				for q, v := range src {
					dst[q] += v
				}
			} else {
				copy(dst, src)
			}
		}
	}
}

// quantizeRow quantises x into dst[:len(x)] by tensor.QuantizeInt8Vec
// (offset by 128 when offset is set), zeroes dst[len(x):] (the zero of
// either form: products with it vanish) and returns the row scale.
func quantizeRow(dst []byte, x []float32, offset bool) float32 {
	clear(dst[len(x):])
	amax, finite := absMax(x)
	var xor byte
	if offset {
		xor = 0x80
	}
	if !finite || amax < 0x1p-100 {
		v := xor
		for i := range x {
			dst[i] = v
		}
		if !finite {
			return nan32
		}
		return 0
	}
	quantizeVec(dst[:len(x)], x, 127/amax, xor)
	return amax / 127
}

var nan32 = float32(math.NaN())

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growI(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// int8TileGo is the portable tile (mr 2, nr 4, kv 1).
func int8TileGo(k int, a []byte, lda int, w []byte, ldw int, c []int32) {
	for r := range 2 {
		x := a[r*lda : r*lda+k]
		for j := range 4 {
			c[r*4+j] = dotInt8(x, w[j*ldw:j*ldw+k])
		}
	}
}

// dotInt8 returns Σ int8(x[i])·int8(w[i]) in int32: the portable loop.
func dotInt8(x, w []byte) int32 {
	w = w[:len(x)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += int32(int8(x[i])) * int32(int8(w[i]))
		s1 += int32(int8(x[i+1])) * int32(int8(w[i+1]))
		s2 += int32(int8(x[i+2])) * int32(int8(w[i+2]))
		s3 += int32(int8(x[i+3])) * int32(int8(w[i+3]))
	}
	for ; i < len(x); i++ {
		s0 += int32(int8(x[i])) * int32(int8(w[i]))
	}
	return s0 + s1 + s2 + s3
}

// int8OutGo is the epilogue in Go: out[j] = (float32(acc[j])·rs)·cs[j].
func int8OutGo(out []float32, acc []int32, rs float32, cs []float32) {
	cs = cs[:len(out)]
	acc = acc[:len(out)]
	for j := range out {
		out[j] = tensor.Int8Output(acc[j], rs, cs[j])
	}
}

// absMaxGo is tensor.AbsMax.
func absMaxGo(x []float32) (float32, bool) { return tensor.AbsMax(x) }

// quantizeVecGo stores rint(x[i]·inv) clamped to ±127, XORed with xor.
func quantizeVecGo(dst []byte, x []float32, inv float32, xor byte) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = byte(int8(tensor.RoundInt8(v*inv))) ^ xor
	}
}
