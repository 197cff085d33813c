package tensor

import (
	"context"
	"errors"
)

// ErrDeviceFault is wrapped by the errors of Read and Sync when the device
// failed the work queued on it (a command buffer that completed with an
// error or did not finish within the backend's bound, a kernel the device
// could not run), as opposed to the caller's context ending. The results
// of that work are lost; a caller that sees faults repeat should stop using
// the backend.
var ErrDeviceFault = errors.New("device fault")

// Tensor is a float32 activation buffer owned by a Backend. Its elements are
// addressed as a flat array; the operations below say how they read it.
// A Tensor is only valid with the Backend that allocated it.
type Tensor interface {
	// Len returns the number of float32 elements.
	Len() int
}

// Backend runs the primitives of a prefill forward pass. Operations may be
// queued and run later (a GPU backend records them into command buffers);
// they run in the order they were issued, and Read and Sync wait for
// everything issued before them. Arguments are checked by the caller; a
// backend may panic on shapes that do not fit its buffers.
//
// Layout conventions: a matrix of R rows and C columns is row-major with
// element (r, c) at r·C + c. "Tokens" are the rows of a batch of B
// right-padded sequences of T positions each, row b's position t at b·T + t.
// Heads are laid out head-major inside a token: element (token, head, d) of a
// [N, heads, hd] tensor is at (token·heads + head)·hd + d.
//
// A Backend is used by one forward pass at a time; callers serialise.
type Backend interface {
	// Name names the backend ("cpu", "cpu-go", "metal", "metal-emu").
	Name() string

	// Alloc returns a tensor of n float32 elements with unspecified contents.
	Alloc(n int) Tensor
	// Free releases t once the work queued on it has finished.
	Free(t Tensor)
	// Write copies src into t[off : off+len(src)].
	Write(t Tensor, off int, src []float32)
	// Read waits for the queued work and copies t[off : off+len(dst)] into dst.
	Read(ctx context.Context, t Tensor, off int, dst []float32) error
	// Sync waits for all queued work.
	Sync(ctx context.Context) error
	// Copy copies rows × cols elements: dst[dstOff + r·dstStride + c] =
	// src[srcOff + r·srcStride + c]. dst and src must not overlap.
	Copy(dst Tensor, dstOff, dstStride int, src Tensor, srcOff, srcStride, rows, cols int)

	// Embed writes row ids[i] of w (a [V, H] embedding, any weight dtype or
	// quantised) to out[i·H : (i+1)·H].
	Embed(out Tensor, w *Weight, ids []int32)
	// MatMul computes out[rows, O] = x[rows, I] · wᵀ for w of logical shape
	// [O, I], accumulating in float32 whatever w's stored form.
	MatMul(out, x Tensor, w *Weight, rows int)
	// Add computes dst[i] += src[i] for i < n.
	Add(dst, src Tensor, n int)
	// SwiGLU computes out[i] = silu(gate[i]) · up[i] for i < n.
	SwiGLU(out, gate, up Tensor, n int)
	// SigmoidMul computes x[i] *= sigmoid(gate[i]) for i < n.
	SigmoidMul(x, gate Tensor, n int)

	// RMSNorm normalises rows of length n: out[r,:] = x[r,:] /
	// sqrt(mean(x[r,:]²) + eps) · (shift + w), with w of n elements (shift is
	// 1 for zero-centred norms, 0 for plain-scale ones). out may equal x.
	RMSNorm(out, x Tensor, w *Weight, rows, n int, eps, shift float32)
	// GatedRMSNorm computes out[r,:] = w · rms(x[r,:]) · silu(z[r,:]) for rows
	// of length n (w plain-scale, n elements). out may equal x.
	GatedRMSNorm(out, x, z Tensor, w *Weight, rows, n int, eps float32)
	// RoPE rotates x, a [len(pos), heads, hd] tensor, in place: in each head
	// the first rd dims rotate in rotate-half pairs (i, i+rd/2) by angle
	// pos[token]·theta^(−2i/rd), computed in float32; dims rd..hd pass through.
	RoPE(x Tensor, pos []int32, heads, hd, rd int, theta float32)

	// Attention computes causal grouped-query attention for a batch; see
	// AttnArgs. out is [B·T, Heads·HeadDim].
	Attention(out, q, k, v Tensor, a AttnArgs)
	// CausalConv computes the depthwise causal conv over x ([B·T, D]) with
	// kernel w ([D, K] in any weight dtype, row d = channel d's taps, tap K−1
	// on the current position), followed by SiLU, into out ([B·T, D]); see
	// ConvArgs for the state.
	CausalConv(out, x Tensor, w *Weight, a ConvArgs)
	// GatedDelta runs the gated delta rule of a Gated DeltaNet layer; see
	// DeltaArgs. out is [B·T, NV·DV].
	GatedDelta(out, qkv, alpha, beta Tensor, aLog, dtBias *Weight, a DeltaArgs)
}

// AttnArgs describes a batched causal attention. q is [B·T, Heads, HeadDim],
// k and v are [B·T, KVHeads, HeadDim]; query head h uses kv head
// h / (Heads/KVHeads). Row b's query at position t attends to the row's
// prefix keys (Prefix[b], if any, all of them) and to the row's own keys at
// positions 0..t; scores are scaled by Scale and the softmax is in float32.
type AttnArgs struct {
	B, T           int
	Heads, KVHeads int
	HeadDim        int
	Scale          float32
	// Prefix holds one entry per row, or is nil when no row has a prefix.
	// Rows may share an entry; it is only read.
	Prefix []KV
	// Len, when not nil, holds each row's real positions (at most T); the
	// positions after them are padding. A backend may skip the queries at
	// padding positions and write zeros there instead of their attention.
	Len []int
}

// RowLen returns the real positions of row b: Len[b] clamped to [0, T], or
// T when Len is nil.
func (a AttnArgs) RowLen(b int) int {
	if a.Len == nil {
		return a.T
	}
	return max(0, min(a.T, a.Len[b]))
}

// KV is the attention state of a prefix: K and V of Len positions, each
// [Len, KVHeads, HeadDim] (token-major, so that resuming appends).
type KV struct {
	K, V Tensor
	Len  int
}

// ConvArgs describes a batched causal conv over B rows of T positions and D
// channels with K taps.
//
// State, when not nil, has one entry per row (entries may be shared): a
// [K−1, D] tensor of the K−1 inputs before the row's first position, oldest
// first; a nil State or nil entry means zeros. State is only read.
//
// NewState, when not nil, has one entry per row (nil entries are skipped):
// it receives the K−1 inputs ending at position Len[b]−1 of row b (reaching
// into State when Len[b] < K−1), oldest first: the state to resume after the
// row's real tokens.
type ConvArgs struct {
	B, T, D, K int
	State      []Tensor
	NewState   []Tensor
	Len        []int
}

// DeltaArgs describes a batched gated delta rule (qwen35.md §5.3–5.5).
//
// qkv is the conv output [B·T, 2·NK·DK + NV·DV]: per token the queries of the
// NK key heads, then their keys, then the values of the NV value heads. alpha
// and beta are the raw a and b projections, [B·T, NV]. The operation
// L2-normalises q and k per head (eps 1e-6 on the sum of squares), scales q
// by DK^−½, takes β = sigmoid(b) and g = −exp(A_log)·softplus(a + dt_bias),
// and runs the recurrence with value head j reading key head j / (NV/NK), in
// the chunked form with chunks of Chunk positions counted from each row's
// first position.
//
// State has one entry per row, each [NV, DK, DV] float32: it holds the state
// entering the row and is overwritten with the state after the row's T
// positions (padding included, so callers that keep it run unpadded rows).
// Entries must be distinct tensors.
type DeltaArgs struct {
	B, T   int
	NK, NV int
	DK, DV int
	Chunk  int
	State  []Tensor
}

// WarmUpper is implemented by backends that can prepare everything a forward
// pass needs (compiled kernels, pipelines) ahead of the first pass.
type WarmUpper interface {
	WarmUp(ctx context.Context) error
}

// RegionMapper is implemented by backends that can use weights in place
// inside a memory region that stays mapped for the backend's life (a whole
// mmap'd checkpoint file), instead of copying them. Callers hand it only
// memory mapped from a file, never bytes on the Go heap; a backend that
// cannot use a region (alignment, size) declines it and copies the
// weights, so MapRegion fails only when the backend itself is broken.
type RegionMapper interface {
	MapRegion(data []byte) error
}

// Int8Backend is implemented by backends that can run MatMul over int8
// weights (see QuantizeInt8 and the arithmetic in int8.go).
type Int8Backend interface {
	// Int8Kernel returns the name of the kernel that runs int8 products
	// (for status, e.g. "avx2"), or an error saying why int8 is
	// unavailable on this backend.
	Int8Kernel() (string, error)
}

// Pooler is implemented by backends that keep the memory of freed tensors
// and of their scratch buffers for reuse, bounded in bytes, the least
// recently used dropped first (internal/bufpool).
type Pooler interface {
	// PoolStats returns the bytes kept for reuse now and their bound.
	PoolStats() (held, limit int64)
	// SetPoolLimit changes the bound (≤ 0: keep nothing), dropping what is
	// kept beyond it at once.
	SetPoolLimit(bytes int64)
}
