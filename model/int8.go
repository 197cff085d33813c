package model

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/startlux/startlux/tensor"
)

// Int8Options asks Load to run the large projections as int8 (W8A8)
// products; see [LoadOptions.Int8].
//
// At load, after every weight is bound (and a LoRA adapter merged), each
// large projection — attention q/k/v/o_proj, DeltaNet
// in_proj_qkv, in_proj_z and out_proj, MLP gate/up/down_proj — is converted
// by tensor.QuantizeInt8 (from F32, BF16, F16 or MLX affine-quantised
// weights: each group dequantised, the row requantised per channel) and
// replaces the float weight, whose bytes are no longer read: a mapped
// checkpoint's pages are released, a merged copy on the heap is dropped.
// Embeddings, norms, conv taps, in_proj_a/b and the LM head stay as stored.
type Int8Options struct {
	// Calibration holds token rows run once, one at a time, through the
	// float model before conversion, to collect each projection's largest
	// input magnitude per channel for Smooth (and their Gram matrices for
	// GPTQ). It is only read with Smooth or GPTQ.
	Calibration [][]int32
	// Smooth, when in (0, 1], is SmoothQuant's migration strength α: each
	// input channel j of a projection is divided by
	//
	//	s_j = max|x_j|^α / max|W_{·,j}|^(1−α)
	//
	// (the maxima over the calibration rows and over every projection that
	// reads the same input) and the weight's column j multiplied by it, so
	// that outlier channels of the activations, which per-row quantisation
	// handles badly, move into the weights, which are quantised per
	// channel. The division is folded into what makes the input: the
	// preceding RMSNorm's weight (q/k/v, in_proj_qkv/z — whose input
	// in_proj_a/b also read, so their columns are multiplied in float —
	// and gate/up), v_proj's rows (o_proj's input, with one factor per key
	// head's channel), the DeltaNet's gated-norm weight (out_proj's input,
	// one factor per value-head channel) and up_proj's rows (down_proj's
	// input); SmoothInputs says which of them. 0 converts without
	// smoothing.
	Smooth float64
	// SmoothInputs selects the inputs Smooth applies to (0: SmoothDown, the
	// only one that lowered the accuracy gates' error; docs/int8.md).
	SmoothInputs SmoothInputs
	// SmoothFloor, in [0, 1), raises a smoothed input's calibration maxima
	// below that quantile of them (over the input's factors) to it before
	// the factors are computed, so that a channel the calibration rows
	// leave quiet is not magnified (0: off). Of a product of two
	// activations (down_proj's, out_proj's input) the rows see a few
	// percent of a real request's range in some channels.
	SmoothFloor float64
	// Clip chooses each weight channel's scale by tensor.QuantizeInt8Clip
	// (the clipping ratio of least squared rounding error) instead of the
	// absmax rule; the format is the same. The conversion runs about 20
	// times slower.
	Clip bool
	// GPTQ rounds each projection with error compensation on the
	// calibration rows: with the channel scales fixed (absmax, or Clip's),
	// the columns are rounded in order and each column's rounding error
	// is spread over the columns not rounded yet so as to minimise
	// ‖X·(W − Ŵ)ᵀ‖² over the projection's calibration inputs X (GPTQ,
	// with XᵀX damped by 1% of its mean diagonal). The format is the
	// same. It needs Calibration, holds an I×I float64 matrix per
	// projection during the load, and costs O(O·I²) per projection.
	GPTQ bool
}

// DefaultSmooth is the SmoothQuant strength int8 engines use (decide's
// Options.Int8, the prefill benchmark), with the default SmoothInputs
// (down_proj's input): of the inputs tried, the only one whose smoothing
// lowered the accuracy gates' error (docs/int8.md).
const DefaultSmooth = 0.5

// Int8 returns the name of the backend's int8 kernel when the model's
// projections are int8 ("avx2", say), or "" when they are float.
func (m *Model) Int8() string { return m.int8 }

// ProjectionBytes returns the bytes of the large projections (see
// [Int8Options]) as they are held now: int8 values and scales once
// converted, else the checkpoint's bytes.
func (m *Model) ProjectionBytes() int64 {
	var n int64
	for _, ref := range m.projections() {
		n += (*ref.w).Bytes()
	}
	return n
}

// Int8Kernel returns the int8 kernel of backend be, or the reason be cannot
// run int8 products.
func Int8Kernel(be tensor.Backend) (string, error) {
	ib, ok := be.(tensor.Int8Backend)
	if !ok {
		return "", fmt.Errorf("int8: backend %s has no int8 matrix products", be.Name())
	}
	k, err := ib.Int8Kernel()
	if err != nil {
		return "", &int8Error{backend: be.Name(), err: err}
	}
	if k == "" {
		return "", fmt.Errorf("int8: backend %s names no int8 kernel", be.Name())
	}
	return k, nil
}

// int8Error is why a backend cannot run int8 products: "int8: backend X:
// <reason>", the backend's own error unwrapped from it (a leading
// "unavailable — ", which the Metal backend's errors start with, is left
// out of the text).
type int8Error struct {
	backend string
	err     error
}

func (e *int8Error) Error() string {
	return "int8: backend " + e.backend + ": " + strings.TrimPrefix(e.err.Error(), "unavailable — ")
}

func (e *int8Error) Unwrap() error { return e.err }

// projectionBytes returns the stored bytes of c's projections in the
// checkpoint (packed values, scales and biases for MLX-quantised ones): the
// conversion's share of the load progress.
func (r *resolver) projectionBytes(c *Config) int64 {
	var n int64
	for _, s := range c.Tensors() {
		if s.Role != RoleProjection {
			continue
		}
		key := r.key(s.Name)
		keys := []string{key}
		if base, ok := strings.CutSuffix(key, ".weight"); ok {
			keys = append(keys, base+".scales", base+".biases")
		}
		for _, k := range keys {
			if st, ok := r.all[k]; ok {
				n += int64(len(st.info.Data))
			}
		}
	}
	return n
}

// toInt8 converts the model's projections (see Int8Options), smoothing them
// first and rounding them with error compensation when o asks, and reports each converted weight's stored bytes to
// tick. The float weights are released as they are replaced.
func (m *Model) toInt8(ctx context.Context, kernel string, o *Int8Options, heapCopies bool, tick func(int64)) error {
	if !(o.Smooth >= 0 && o.Smooth <= 1) {
		return fmt.Errorf("int8: smoothing strength %v, want 0 (off) or in (0, 1]", o.Smooth)
	}
	if !(o.SmoothFloor >= 0 && o.SmoothFloor < 1) {
		return fmt.Errorf("int8: smoothing floor %v, want a quantile in [0, 1)", o.SmoothFloor)
	}
	var (
		sm   *smoothing
		amax map[*tensor.Weight][]float32
		gram map[*tensor.Weight][]float64
	)
	if o.Smooth > 0 || o.GPTQ {
		if len(o.Calibration) == 0 {
			if o.GPTQ {
				return fmt.Errorf("int8: error-compensated rounding needs calibration rows")
			}
			return fmt.Errorf("int8: smoothing needs calibration rows")
		}
		var err error
		if amax, gram, err = m.calibrate(ctx, o.Calibration, o.GPTQ); err != nil {
			return err
		}
	}
	if o.Smooth > 0 {
		var err error
		inputs := o.SmoothInputs
		if inputs == 0 {
			inputs = SmoothDown
		}
		if sm, err = m.smooth(amax, float32(o.Smooth), o.SmoothFloor, inputs); err != nil {
			return err
		}
	}
	for _, ref := range m.projections() {
		w := *ref.w
		var q *tensor.Weight
		var err error
		switch {
		case gram != nil:
			q, err = gptqInt8(w, sm.cols(w), gram[w], o.Clip)
		case o.Clip:
			q, err = tensor.QuantizeInt8ColsClip(w, sm.cols(w))
		default:
			q, err = tensor.QuantizeInt8Cols(w, sm.cols(w))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ref.Name, err)
		}
		if rs := sm.rows(w); rs != nil {
			for c := range q.Int8.Scales {
				q.Int8.Scales[c] *= rs[c]
			}
		}
		if err := m.release(w); err != nil {
			return err
		}
		*ref.w = q
		tick(w.Bytes())
	}
	m.int8 = kernel
	if heapCopies {
		// The merged float copies are garbage now; give their memory back
		// rather than leave it to the next collection.
		debug.FreeOSMemory()
	}
	return nil
}

// release tells the checkpoint's files that w's bytes (with an MLX
// weight's scales and biases) will not be read again. A weight on the heap
// (a LoRA merge, a file read into memory) is left to the collector.
func (m *Model) release(w *tensor.Weight) error {
	parts := [][]byte{w.Data}
	if q := w.Quant; q != nil {
		parts = append(parts, q.Scales.Data, q.Biases.Data)
	}
	for _, f := range m.files {
		for _, b := range parts {
			if err := f.Release(b); err != nil {
				return err
			}
		}
	}
	return nil
}
