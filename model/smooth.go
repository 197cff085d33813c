package model

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/startlux/startlux/tensor"
)

// SmoothQuant (see Int8Options.Smooth): calibration collects each
// projection's largest input magnitude per channel over a few rows run in
// float; smooth turns them into per-channel factors, folds their inverse
// into what makes each input and hands the conversion the column factors
// (and, for the weights that make an input, row factors).

// amaxRecorder is a backend that passes everything through and, for the
// weights it watches, records the largest |x| per input channel of every
// MatMul by them (reading x back from the backend) and, for those in gram,
// adds xᵀx of every row.
type amaxRecorder struct {
	tensor.Backend
	ctx  context.Context
	mu   sync.Mutex
	amax map[*tensor.Weight][]float32
	gram map[*tensor.Weight][]float64 // XᵀX of the inputs, when not nil
	buf  []float32
	err  error
}

func (r *amaxRecorder) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	r.mu.Lock()
	if am, ok := r.amax[w]; ok && r.err == nil {
		n := w.Cols()
		if cap(r.buf) < rows*n {
			r.buf = make([]float32, rows*n)
		}
		buf := r.buf[:rows*n]
		if err := r.Backend.Read(r.ctx, x, 0, buf); err != nil {
			r.err = err
		}
		for i, v := range buf {
			am[i%n] = max(am[i%n], float32(math.Abs(float64(v))))
		}
		if g := r.gram[w]; g != nil {
			for k := range rows {
				x := buf[k*n : (k+1)*n]
				for i, a := range x {
					if a == 0 {
						continue
					}
					gi := g[i*n : (i+1)*n]
					for j, b := range x {
						gi[j] += float64(a) * float64(b)
					}
				}
			}
		}
	}
	r.mu.Unlock()
	r.Backend.MatMul(out, x, w, rows)
}

// calibrate runs each row (token ids, whole, every position gathered)
// through the float model and returns every projection's largest input
// magnitude per channel and, with gram, the Gram matrix XᵀX of its inputs
// (I×I, row-major, float64).
func (m *Model) calibrate(ctx context.Context, rows [][]int32, gram bool) (map[*tensor.Weight][]float32, map[*tensor.Weight][]float64, error) {
	rec := &amaxRecorder{Backend: m.be, ctx: ctx, amax: map[*tensor.Weight][]float32{}}
	if gram {
		rec.gram = map[*tensor.Weight][]float64{}
	}
	for _, ref := range m.projections() {
		rec.amax[*ref.w] = make([]float32, (*ref.w).Cols())
		if gram {
			rec.gram[*ref.w] = make([]float64, (*ref.w).Cols()*(*ref.w).Cols())
		}
	}
	be := m.be
	m.be = rec
	defer func() { m.be = be }()
	for i, ids := range rows {
		if _, err := m.Forward(ctx, []Row{{IDs: ids, Gather: seq(len(ids))}}, nil); err != nil {
			return nil, nil, fmt.Errorf("int8: calibration row %d: %w", i, err)
		}
		if rec.err != nil {
			return nil, nil, fmt.Errorf("int8: calibration row %d: read back: %w", i, rec.err)
		}
	}
	return rec.amax, rec.gram, nil
}

// seq returns 0, 1, ..., n−1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// smoothing is the outcome of smooth: the factors the conversion applies
// to each projection.
type smoothing struct {
	colF map[*tensor.Weight][]float32 // W·diag(s): the projections reading a smoothed input
	rowF map[*tensor.Weight][]float32 // diag(1/s)·W: the projections making one
}

// cols returns the column factors of w (nil: none).
func (s *smoothing) cols(w *tensor.Weight) []float32 {
	if s == nil {
		return nil
	}
	return s.colF[w]
}

// rows returns the output-channel factors of w (nil: none).
func (s *smoothing) rows(w *tensor.Weight) []float32 {
	if s == nil {
		return nil
	}
	return s.rowF[w]
}

// SmoothInputs is a set of the projection inputs SmoothQuant may smooth
// (see Int8Options.Smooth).
type SmoothInputs uint8

// The inputs SmoothQuant may smooth, by where the factors are folded.
const (
	// SmoothDown is down_proj's input, silu(gate)·up: up_proj's rows.
	SmoothDown SmoothInputs = 1 << iota
	// SmoothMixerNorm is the mixer's input (q/k/v_proj, in_proj_qkv/z;
	// in_proj_a/b's columns are multiplied in float): input_layernorm.
	SmoothMixerNorm
	// SmoothMLPNorm is gate/up_proj's input: post_attention_layernorm.
	SmoothMLPNorm
	// SmoothAttnOut is o_proj's input: v_proj's rows, one factor per key
	// head's channel.
	SmoothAttnOut
	// SmoothDeltaOut is out_proj's input: the DeltaNet's gated-norm
	// weight, one factor per value-head channel.
	SmoothDeltaOut
	// SmoothAll is every input above.
	SmoothAll = SmoothDown | SmoothMixerNorm | SmoothMLPNorm | SmoothAttnOut | SmoothDeltaOut
)

// site is one input shared by projections, and where it is made.
type site struct {
	kind  SmoothInputs
	name  string
	users []*tensor.Weight  // converted projections reading the input
	extra []**tensor.Weight // float weights reading it too: columns × s, replaced
	// keys is the number of independent factors; key maps an input channel
	// to its factor (channels that the source cannot scale apart share one).
	keys int
	key  func(i int) int
	// fold divides the input by s (one value per input channel) where it
	// is made.
	fold func(s []float32) error
}

// sites lists every smoothable input of the model.
func (m *Model) sites(sm *smoothing) []site {
	c := &m.Config
	var out []site
	ident := func(i int) int { return i }
	normFold := func(name string, w **tensor.Weight) func([]float32) error {
		return func(s []float32) error {
			v := (*w).Float32s()
			for i := range v {
				v[i] = (m.normShift+v[i])/s[i] - m.normShift
			}
			*w = tensor.FromFloat32((*w).Name, tensor.F32, (*w).Shape, v)
			return nil
		}
	}
	rowFold := func(src *tensor.Weight) func([]float32) error {
		return func(s []float32) error {
			r := make([]float32, len(s))
			for i, f := range s {
				r[i] = 1 / f
			}
			sm.rowF[src] = r
			return nil
		}
	}
	for i := range m.layers {
		l := &m.layers[i]
		p := layerPrefix(i)
		H := c.Hidden
		switch mx := l.mixer.(type) {
		case *attention:
			out = append(out, site{kind: SmoothMixerNorm, name: p + "input_layernorm", users: []*tensor.Weight{mx.q, mx.k, mx.v},
				keys: H, key: ident, fold: normFold(p+"input_layernorm", &l.inNorm)})
			// o_proj reads softmax·V gated per channel: linear in V's
			// channels, so v_proj's rows take the factors; query heads
			// sharing a key head share them.
			hd, group := c.HeadDim, c.Heads/c.KVHeads
			out = append(out, site{kind: SmoothAttnOut, name: p + "self_attn.v_proj", users: []*tensor.Weight{mx.o},
				keys: c.KVHeads * hd, key: func(i int) int { return (i/hd)/group*hd + i%hd },
				fold: func(s []float32) error {
					r := make([]float32, c.KVHeads*hd)
					for j := range r {
						r[j] = 1 / s[(j/hd)*group*hd+j%hd]
					}
					sm.rowF[mx.v] = r
					return nil
				}})
		case *deltaNet:
			out = append(out, site{kind: SmoothMixerNorm, name: p + "input_layernorm", users: []*tensor.Weight{mx.qkv, mx.z},
				extra: []**tensor.Weight{&mx.a, &mx.b}, keys: H, key: ident, fold: normFold(p+"input_layernorm", &l.inNorm)})
			// out_proj reads norm_w ⊙ rms(o) ⊙ silu(z) per value head: the
			// plain-scale norm weight (one per channel of a head) takes the
			// factors.
			dv := c.DV
			out = append(out, site{kind: SmoothDeltaOut, name: p + "linear_attn.norm", users: []*tensor.Weight{mx.out},
				keys: dv, key: func(i int) int { return i % dv },
				fold: func(s []float32) error {
					v := mx.norm.Float32s()
					for j := range v {
						v[j] /= s[j]
					}
					mx.norm = tensor.FromFloat32(mx.norm.Name, tensor.F32, mx.norm.Shape, v)
					return nil
				}})
		}
		out = append(out, site{kind: SmoothMLPNorm, name: p + "post_attention_layernorm", users: []*tensor.Weight{l.mlp.gate, l.mlp.up},
			keys: H, key: ident, fold: normFold(p+"post_attention_layernorm", &l.postNorm)})
		out = append(out, site{kind: SmoothDown, name: p + "mlp.up_proj", users: []*tensor.Weight{l.mlp.down},
			keys: c.Intermediate, key: ident, fold: rowFold(l.mlp.up)})
	}
	return out
}

// smooth computes the factors of the sites of the given kinds from the
// calibration maxima (those below the floor quantile of a site's raised to
// it) with strength alpha, folds them and returns what the
// conversion applies.
func (m *Model) smooth(amax map[*tensor.Weight][]float32, alpha float32, floor float64, inputs SmoothInputs) (*smoothing, error) {
	sm := &smoothing{colF: map[*tensor.Weight][]float32{}, rowF: map[*tensor.Weight][]float32{}}
	for _, st := range m.sites(sm) {
		if inputs&st.kind == 0 {
			continue
		}
		n := st.users[0].Cols()
		xa, wa := make([]float32, st.keys), make([]float32, st.keys)
		for _, u := range st.users {
			a := amax[u]
			if len(a) != n || u.Cols() != n {
				return nil, fmt.Errorf("int8: smoothing %s: %s has %d in-features, want %d", st.name, u.Name, u.Cols(), n)
			}
			cm := colMax(u)
			for i := range n {
				k := st.key(i)
				xa[k] = max(xa[k], a[i])
				wa[k] = max(wa[k], cm[i])
			}
		}
		if floor > 0 {
			srt := slices.Clone(xa)
			slices.Sort(srt)
			fl := srt[int(floor*float64(len(srt)))]
			for k := range xa {
				xa[k] = max(xa[k], fl)
			}
		}
		s := make([]float32, n)
		for i := range n {
			s[i] = smoothFactor(xa[st.key(i)], wa[st.key(i)], alpha)
		}
		if err := st.fold(s); err != nil {
			return nil, fmt.Errorf("int8: smoothing %s: %w", st.name, err)
		}
		for _, u := range st.users {
			sm.colF[u] = s
		}
		for _, e := range st.extra {
			w := *e
			v := w.Float32s()
			for i := range v {
				v[i] *= s[i%n]
			}
			*e = tensor.FromFloat32(w.Name, tensor.F32, w.Shape, v)
		}
	}
	return sm, nil
}

// smoothFactor is SmoothQuant's s = xa^α / wa^(1−α), clamped to
// [2⁻²⁰, 2²⁰]; 1 where either maximum is zero (nothing to migrate).
func smoothFactor(xa, wa, alpha float32) float32 {
	if !(xa > 0) || !(wa > 0) {
		return 1
	}
	s := math.Pow(float64(xa), float64(alpha)) / math.Pow(float64(wa), float64(1-alpha))
	return float32(min(max(s, 0x1p-20), 0x1p20))
}

// colMax returns max_o |w[o, i]| for every column i.
func colMax(w *tensor.Weight) []float32 {
	n := w.Cols()
	out := make([]float32, n)
	row := make([]float32, n)
	for r := range w.Rows() {
		w.Row(r, row)
		for i, v := range row {
			out[i] = max(out[i], float32(math.Abs(float64(v))))
		}
	}
	return out
}
