// Package work counts the arithmetic of forward passes. A [Counter] wraps a
// tensor.Backend and, as the model calls it, adds up the floating-point
// operations of the calls that carry a pass's arithmetic: the matrix
// products, the attention and the delta rule. Benchmarks divide a request's
// time by its work to compare paths that do different amounts of it (a cold
// and a warm decision) or the same amount in different shapes (one batch
// against one request at a time).
package work

import (
	"context"
	"sync/atomic"

	"github.com/startlux/startlux/tensor"
)

// Counter is a tensor.Backend that passes every call on, unchanged, to the
// backend it wraps and counts the operations of MatMul, Attention and
// GatedDelta. Norms, activations, RoPE, the causal convolution and copies
// are not counted: they cost a few operations per element of their tensors,
// where a product costs two per weight.
//
// A Counter also passes on the optional tensor.RegionMapper and
// tensor.WarmUpper, doing nothing where the wrapped backend has neither, so
// a model loads on it as on the backend itself. It is safe for concurrent
// use.
type Counter struct {
	tensor.Backend
	matMul, attention, delta atomic.Int64
}

// New returns a Counter passing calls on to be, with all counts zero.
func New(be tensor.Backend) *Counter { return &Counter{Backend: be} }

// Counts is the work counted so far, in floating-point operations (a
// multiply-add is two).
type Counts struct {
	MatMul    int64 // 2·rows·out·in per MatMul call, padding rows included
	Attention int64 // QKᵀ and PV: 4·heads·headDim per (real query, key it sees)
	Delta     int64 // the recurrent form: 6·DK·DV per (position, value head)
}

// Total returns the sum of the counts.
func (c Counts) Total() int64 { return c.MatMul + c.Attention + c.Delta }

// Sub returns c − d, the work done between two snapshots.
func (c Counts) Sub(d Counts) Counts {
	return Counts{c.MatMul - d.MatMul, c.Attention - d.Attention, c.Delta - d.Delta}
}

// Counts returns the work counted so far.
func (c *Counter) Counts() Counts {
	return Counts{c.matMul.Load(), c.attention.Load(), c.delta.Load()}
}

// MatMul counts 2·rows·w.Rows()·w.Cols() and passes the call on.
func (c *Counter) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	c.matMul.Add(MatMul(rows, w.Rows(), w.Cols()))
	c.Backend.MatMul(out, x, w, rows)
}

// Attention counts the products of every real query (a.RowLen) with the keys
// it sees, its row's prefix and its own keys up to its position, and passes
// the call on.
func (c *Counter) Attention(out, q, k, v tensor.Tensor, a tensor.AttnArgs) {
	c.attention.Add(Attention(a))
	c.Backend.Attention(out, q, k, v, a)
}

// GatedDelta counts the delta rule's recurrent form over every position of
// the batch (the backends run the padding too) and passes the call on.
func (c *Counter) GatedDelta(out, qkv, alpha, beta tensor.Tensor, aLog, dtBias *tensor.Weight, a tensor.DeltaArgs) {
	c.delta.Add(Delta(a))
	c.Backend.GatedDelta(out, qkv, alpha, beta, aLog, dtBias, a)
}

// MapRegion passes the call on to a wrapped tensor.RegionMapper, and does
// nothing for a backend that is none.
func (c *Counter) MapRegion(data []byte) error {
	if rm, ok := c.Backend.(tensor.RegionMapper); ok {
		return rm.MapRegion(data)
	}
	return nil
}

// WarmUp passes the call on to a wrapped tensor.WarmUpper, and does nothing
// for a backend that is none.
func (c *Counter) WarmUp(ctx context.Context) error {
	if w, ok := c.Backend.(tensor.WarmUpper); ok {
		return w.WarmUp(ctx)
	}
	return nil
}

// MatMul returns the operations of a [rows, in] by [in, out] product.
func MatMul(rows, out, in int) int64 { return 2 * int64(rows) * int64(out) * int64(in) }

// Attention returns the operations of the attention a describes: for a row
// with p prefix positions and n real queries, query i sees p + i + 1 keys,
// and each (query, key) costs a score and a weighted value, 2·headDim
// operations each, for every query head.
func Attention(a tensor.AttnArgs) int64 {
	var pairs int64
	for b := range a.B {
		var p int64
		if a.Prefix != nil {
			p = int64(a.Prefix[b].Len)
		}
		n := int64(a.RowLen(b))
		pairs += n*p + n*(n+1)/2
	}
	return 4 * int64(a.Heads) * int64(a.HeadDim) * pairs
}

// Delta returns the operations of the delta rule a describes in its
// recurrent form: per position and value head, three products of a DK-vector
// with the DK×DV state (the read for the output, the read for the delta and
// the rank-one update), two operations per element each.
func Delta(a tensor.DeltaArgs) int64 {
	return 6 * int64(a.B) * int64(a.T) * int64(a.NV) * int64(a.DK) * int64(a.DV)
}
