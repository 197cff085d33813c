package decide

import (
	"fmt"

	"github.com/startlux/startlux/model"
)

// warmUpJSON holds common request shapes: a lone yes/no question, a score, a
// choice, and several questions on one piece of evidence.
func warmUpJSON() []string {
	return []string{
		`{"evidence":{"name":"Ada","age":36,"city":"London"},"questions":{"q":{"type":"noul","instructions":"Does Ada live in London?"}}}`,
		`{"evidence":{"page":"Row 0: item 0, qty 3. Row 1: item 1, qty 0."},"questions":{"q":{"type":"score","instructions":"How much is on the page?","criteria":["empty","some","full"]}}}`,
		`{"evidence":{"items":[{"name":"lamp","qty":2},{"name":"desk","qty":0}]},"questions":{"q":{"type":"choice","instructions":"Which item is out of stock?","criteria":{"lamp":"lamp","desk":"desk","chair":"chair","none":"none"}}}}`,
		`{"evidence":{"store":"north","items":[{"name":"tape","qty":10},{"name":"fig","qty":9}]},"questions":{"a":{"type":"noul","instructions":"Is tape in stock?"},"b":{"type":"score","instructions":"How full is the store?","criteria":["empty","some","full"]},"c":{"type":"choice","instructions":"Which item has more?","criteria":{"tape":"tape","fig":"fig"}}}}`,
	}
}

// WarmUpRequests returns common request shapes, the ones a service runs
// after a load so that the first real requests do not pay for first-use
// costs. Their rows are also what an int8 engine calibrates on (see
// Options.Int8).
func WarmUpRequests() []*Request {
	var out []*Request
	for i, js := range warmUpJSON() {
		r, err := ParseJSON([]byte(js))
		if err != nil {
			panic(fmt.Sprintf("decide: warm-up request %d: %v", i, err)) // the shapes above are constants
		}
		out = append(out, r)
	}
	return out
}

// warmUpRows renders every question of the warm-up requests as one whole
// row of token ids (the first row a request would run: the first
// wide-choice group of its options), through row, which renders one
// question of a request whose evidence is ev (nil: the question is left
// out).
func warmUpRows(row func(ev string, q *Question, opts []Option) []int32) [][]int32 {
	var rows [][]int32
	for _, r := range WarmUpRequests() {
		ev, err := validatedEvidence(r, Limits{}.withDefaults(0), 0)
		if err != nil {
			continue // cannot happen for the constant shapes; nothing to calibrate on
		}
		for i := range r.Questions {
			q := &r.Questions[i]
			opts, err := q.Options()
			if err != nil {
				continue
			}
			if ids := row(ev, q, opts); len(ids) > 0 {
				rows = append(rows, ids)
			}
		}
	}
	return rows
}

// warmUpRows returns the warm-up questions' first rows as a jevfmt/1
// checkpoint renders them.
func (c *Config) warmUpRows(tok Encoder) [][]int32 {
	return warmUpRows(func(ev string, q *Question, opts []Option) []int32 {
		labels := make([]string, 0, len(opts))
		for _, o := range opts[:min(len(opts), c.WideChoice.Group)] {
			labels = append(labels, o.Label)
		}
		return tok.Encode(c.renderRow(ev, q.Instructions, labels))
	})
}

// warmUpRows returns the warm-up questions' rows as a pointer/1 checkpoint
// runs them: the state, then the question's branch.
func (c *PointerConfig) warmUpRows(tok Encoder) [][]int32 {
	return warmUpRows(func(ev string, q *Question, opts []Option) []int32 {
		branch, _, _, _, err := pointerBranch(tok, q.Instructions, opts, 1<<30)
		if err != nil {
			return nil
		}
		return append(tok.Encode(pointerState(c.System, ev)), branch...)
	})
}

// int8Options returns the model's int8 options for o (nil: float
// projections), calibrating on rows when it smooths.
func (o Options) int8Options(rows func() [][]int32) *model.Int8Options {
	if !o.Int8 {
		return nil
	}
	io := &model.Int8Options{Smooth: model.DefaultSmooth, SmoothInputs: model.SmoothDown}
	if o.int8Tune != nil {
		o.int8Tune(io)
	}
	if io.Smooth > 0 || io.GPTQ {
		io.Calibration = rows()
	}
	return io
}
