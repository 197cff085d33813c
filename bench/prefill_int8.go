package bench

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/startlux/startlux/model"
)

// PrefillInt8 is the int8 comparison of the prefill benchmark: one bf16
// checkpoint loaded in float and with int8 projections, their prefills
// alternated (bf16 first in even rounds, int8 first in odd ones, so that a
// drift of the machine's load falls on both).
type PrefillInt8 struct {
	Kernel string // the backend's int8 kernel
	// BF16 and Int8 are the prefill times in seconds, in the order run.
	BF16, Int8 []float64
	// ConvertSeconds is the int8 load: calibration rows in float,
	// smoothing, conversion.
	ConvertSeconds float64
	// ProjBF16 and ProjInt8 are the projections' bytes in each model;
	// WeightBF16 and WeightInt8 every weight's.
	ProjBF16, ProjInt8     int64
	WeightBF16, WeightInt8 int64
	// ResidentBF16 and ResidentInt8 are what each model added to the
	// process's resident set, loaded and after its first prefill (the bf16
	// model first, so that it also counts the scratch buffers both use),
	// with the share of pages mapped from the checkpoint file (Linux; 0
	// elsewhere).
	ResidentBF16, ResidentInt8 int64
	FileBF16, FileInt8         int64
	// Check, with PrefillOptions.Check: the final hidden states of every
	// position, int8 against bf16.
	Check *HiddenCheck
}

// HiddenCheck is the relative error ‖a−b‖/‖b‖ of final hidden states.
type HiddenCheck struct {
	Positions   int
	Mean, Max   float64 // over positions, each position's vector
	Whole       float64 // over the whole [positions, hidden] matrix
	MaxPosition int
}

// int8 writes the bf16 checkpoint into dir and runs the int8 comparison.
func (b *prefillBench) int8(ctx context.Context, dir string, check bool) (*PrefillInt8, error) {
	if _, _, err := b.write(dir, 0, "bf16"); err != nil {
		return nil, err
	}
	kernel, err := model.Int8Kernel(b.be)
	if err != nil {
		return nil, err
	}
	r := &PrefillInt8{Kernel: kernel}
	ids := b.ids(0x9e3779b97f4a7c15)
	debug.FreeOSMemory()
	rss0, file0 := currentRSS(), fileRSS()
	fl, err := model.Load(dir, b.be, model.LoadOptions{})
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	if _, err := timePrefill(ctx, fl, ids); err != nil { // warm-up: the mapping's pages, scratch buffers
		return nil, err
	}
	rss1, file1 := currentRSS(), fileRSS()
	r.ResidentBF16, r.FileBF16 = rss1-rss0, file1-file0

	// Calibration as an int8 engine does it, on rows apart from the prompt.
	calib := [][]int32{b.ids(1)[:min(b.tokens, 128)], b.ids(2)[:min(b.tokens, 128)]}
	t0 := time.Now()
	q, err := model.Load(dir, b.be, model.LoadOptions{Int8: &model.Int8Options{Smooth: model.DefaultSmooth, Calibration: calib},
		Progress: b.progress("converting to int8")})
	if err != nil {
		return nil, err
	}
	defer q.Close()
	r.ConvertSeconds = time.Since(t0).Seconds()
	b.env.logf("loaded with int8 projections (kernel %s) in %.1fs\n", kernel, r.ConvertSeconds)
	if _, err := timePrefill(ctx, q, ids); err != nil {
		return nil, err
	}
	debug.FreeOSMemory()
	r.ResidentInt8, r.FileInt8 = currentRSS()-rss1, fileRSS()-file1
	r.ProjBF16, r.ProjInt8 = fl.ProjectionBytes(), q.ProjectionBytes()
	r.WeightBF16, r.WeightInt8 = fl.WeightBytes(), q.WeightBytes()

	for i := range b.runs {
		order := []*model.Model{fl, q}
		if i%2 == 1 {
			order = []*model.Model{q, fl}
		}
		for _, m := range order {
			d, err := timePrefill(ctx, m, ids)
			if err != nil {
				return nil, err
			}
			kind := "bf16"
			if m == q {
				kind = "int8"
				r.Int8 = append(r.Int8, d.Seconds())
			} else {
				r.BF16 = append(r.BF16, d.Seconds())
			}
			b.env.logf("%s prefill %d tokens: %.2fs\n", kind, b.tokens, d.Seconds())
		}
	}
	if check {
		if r.Check, err = checkHidden(ctx, fl, q, ids); err != nil {
			return r, err
		}
	}
	return r, nil
}

// progress returns a Progress option that logs every tenth of a load.
func (b *prefillBench) progress(what string) func(done, total int64) {
	last := int64(-1)
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		if tenth := done * 10 / total; tenth != last {
			last = tenth
			b.env.logf("  %s: %d%%\n", what, tenth*10)
		}
	}
}

// checkHidden compares the final normed hidden states of every position
// of ids, model q against model f.
func checkHidden(ctx context.Context, f, q *model.Model, ids []int32) (*HiddenCheck, error) {
	all := make([]int, len(ids))
	for i := range all {
		all[i] = i
	}
	rows := []model.Row{{IDs: ids, Gather: all}}
	a, err := f.Forward(ctx, rows, nil)
	if err != nil {
		return nil, err
	}
	b, err := q.Forward(ctx, rows, nil)
	if err != nil {
		return nil, err
	}
	h := f.Config.Hidden
	c := &HiddenCheck{Positions: len(ids)}
	var dAll, sAll float64
	for p := range len(ids) {
		var d, s float64
		for i := p * h; i < (p+1)*h; i++ {
			x := float64(b[0][i]) - float64(a[0][i])
			d += x * x
			s += float64(a[0][i]) * float64(a[0][i])
		}
		e := math.Sqrt(d / max(s, 1e-30))
		if math.IsNaN(e) {
			return c, fmt.Errorf("position %d: the int8 hidden state is not finite", p)
		}
		c.Mean += e
		if e > c.Max {
			c.Max, c.MaxPosition = e, p
		}
		dAll += d
		sAll += s
	}
	c.Mean /= float64(len(ids))
	c.Whole = math.Sqrt(dAll / max(sAll, 1e-30))
	return c, nil
}

// spread returns the median, the fastest and the slowest of xs.
func spread(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s), s[0], s[len(s)-1]
}

func (r *PrefillInt8) print(p *printer, tokens int) {
	bm, blo, bhi := spread(r.BF16)
	qm, qlo, qhi := spread(r.Int8)
	ratios := make([]float64, len(r.BF16))
	for i := range ratios {
		ratios[i] = r.BF16[i] / r.Int8[i]
	}
	rm, rlo, rhi := spread(ratios)
	tps := func(s float64) float64 { return float64(tokens) / s }
	p.printf("prefill %d tokens, %d runs each, alternated:\n", tokens, len(r.BF16))
	label := "int8 (" + r.Kernel + ")"
	w := max(len(label), len("bf16"))
	p.printf("  %-*s %7.1f tok/s (median %.2fs; fastest %.2fs, slowest %.2fs)\n", w, "bf16", tps(bm), bm, blo, bhi)
	p.printf("  %-*s %7.1f tok/s (median %.2fs; fastest %.2fs, slowest %.2fs)\n", w, label, tps(qm), qm, qlo, qhi)
	p.printf("  int8 / bf16: %.2f× (ratio of the medians); per pair median %.2f×, from %.2f× to %.2f×\n", bm/qm, rm, rlo, rhi)
	p.printf("  projections: bf16 %.3f GB, int8 %.3f GB = %.3f× (goal ≤ 0.55×); all weights %.3f GB → %.3f GB\n",
		float64(r.ProjBF16)/1e9, float64(r.ProjInt8)/1e9, float64(r.ProjInt8)/float64(r.ProjBF16), float64(r.WeightBF16)/1e9, float64(r.WeightInt8)/1e9)
	p.printf("  resident after load and one prefill: bf16 model %.3f GB (%.3f GB of it mapped from the file), int8 model %.3f GB (%.3f GB) = %.2f×\n",
		float64(r.ResidentBF16)/1e9, float64(r.FileBF16)/1e9, float64(r.ResidentInt8)/1e9, float64(r.FileInt8)/1e9, float64(r.ResidentInt8)/float64(r.ResidentBF16))
	p.printf("  int8 load (calibration rows in float, smoothing, conversion): %.1fs\n", r.ConvertSeconds)
	if c := r.Check; c != nil {
		p.printf("  final hidden state, int8 against bf16, relative error over %d positions: mean %.2e, max %.2e (position %d), whole %.2e\n",
			c.Positions, c.Mean, c.Max, c.MaxPosition, c.Whole)
	}
}
