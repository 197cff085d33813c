package gpucheck

import (
	"context"
	"fmt"
	"io/fs"
	"math"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/model"
	"github.com/startlux/startlux/tensor"
	"github.com/startlux/startlux/tokenizer"
)

// ModelTol bounds the relative error of one row's letter logits.
const ModelTol = 1e-3

// modelRows are the questions of the rows run through the demo model, each
// after the system turn and "Evidence:": three rows of
// testdata/goldens/render-demo.json (cases 8, 7 and 24), of 102, 93 and 137
// tokens, so the batch is right-padded and its rows end in different
// chunks.
var modelRows = []string{
	"42\n\nQuestion: Is it there?\nA. yes\nB. no\nC. the evidence does not say\n" + rowEnd,
	"\"plain string\"\n\nQuestion: Rate it.\nA. low\nB. high\n" + rowEnd,
	`{"page": "Row 0: item 0, qty 3. Row 1: item 1, qty 0.\nline two\ttabbed"}` + "\n\nQuestion: Which item?\nA. first\nB. second\nC. third\n" + rowEnd,
}

const rowEnd = "Answer with one letter.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

// modelLetters is how many letters' logits are compared per row (A, B, C).
const modelLetters = 3

// demoRows returns the token ids of the check's rows (whole rows, the
// system turn included) and the token ids of the letters compared.
func demoRows(fsys fs.FS) (rows [][]int32, letters []int, err error) {
	data, err := fs.ReadFile(fsys, decide.ConfigFile)
	if err != nil {
		return nil, nil, fmt.Errorf("demo model: %w", err)
	}
	cfg, err := decide.ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("demo model: %w", err)
	}
	data, err = fs.ReadFile(fsys, "tokenizer.json")
	if err != nil {
		return nil, nil, fmt.Errorf("demo model: %w", err)
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("demo model: tokenizer.json: %w", err)
	}
	head := "<|im_start|>system\n" + cfg.System + "<|im_end|>\n<|im_start|>user\nEvidence:\n"
	for _, r := range modelRows {
		rows = append(rows, tok.Encode(head+r))
	}
	return rows, cfg.LetterTokenIDs[:modelLetters], nil
}

// checkModel runs the demo model on be and on ref: the rows' shared prefix
// once (a prefill), then every row after it in one right-padded batch, the
// letter logits read at each row's last position, and compares them row by
// row.
func checkModel(ctx context.Context, be, ref tensor.Backend) ModelResult {
	res := ModelResult{Ran: true, Tol: ModelTol}
	fsys := startlux.DemoModel()
	rows, letters, err := demoRows(fsys)
	if err != nil {
		res.Err = err
		return res
	}
	got, err := demoLogits(ctx, fsys, be, rows, letters)
	if err != nil {
		res.Err = err
		return res
	}
	want, err := demoLogits(ctx, fsys, ref, rows, letters)
	if err != nil {
		res.Err = fmt.Errorf("on the reference backend: %w", err)
		return res
	}
	res.Rows = len(rows)
	for i := range rows {
		var num, den float64
		for j := range want[i] {
			g, w := float64(got[i][j]), float64(want[i][j])
			if math.IsNaN(g) || math.IsInf(g, 0) {
				res.Err = fmt.Errorf("letter %d's logit of row %d is %v", j, i, got[i][j])
				return res
			}
			num += (g - w) * (g - w)
			den += w * w
		}
		r := math.Sqrt(num / max(den, 1e-30))
		if res.Where == "" || r > res.MaxRel {
			res.MaxRel, res.Where = r, fmt.Sprintf("row %d", i)
		}
	}
	return res
}

// demoLogits loads the demo model on be and returns each row's letter
// logits.
func demoLogits(ctx context.Context, fsys fs.FS, be tensor.Backend, rows [][]int32, letters []int) (_ [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	m, err := model.LoadFS(fsys, "demo-decision (self-check)", be, model.LoadOptions{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	n := commonPrefix(rows)
	pre, err := m.Prefill(ctx, nil, rows[0][:n])
	if err != nil {
		return nil, err
	}
	defer pre.Free()
	batch := make([]model.Row, len(rows))
	for i, r := range rows {
		batch[i] = model.Row{Prefix: pre, IDs: r[n:], Gather: []int{len(r) - n - 1}}
	}
	return m.Forward(ctx, batch, m.HeadRows(letters))
}

// commonPrefix returns how many leading tokens every row shares, leaving
// each row at least one token of its own.
func commonPrefix(rows [][]int32) int {
	n := len(rows[0]) - 1
	for _, r := range rows[1:] {
		n = min(n, len(r)-1)
		for i := range n {
			if r[i] != rows[0][i] {
				n = i
				break
			}
		}
	}
	return n
}
