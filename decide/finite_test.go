package decide

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/model/safetensors"
)

// nanDemo copies the demo checkpoint with the given rows of one tensor (all
// of it when rows is nil) overwritten with NaN, as flipped bytes would.
func nanDemo(t *testing.T, tensor string, rows []int) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(demoDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(demoDir(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "model.safetensors" {
			f, err := safetensors.Parse(e.Name(), data) // its tensors alias data
			if err != nil {
				t.Fatal(err)
			}
			info := f.Tensor(tensor)
			if info == nil || info.DType.Size() != 2 {
				t.Fatalf("no bf16 tensor %s", tensor)
			}
			rowBytes := len(info.Data) / info.Shape[0]
			for r := range info.Shape[0] {
				if rows != nil && !slices.Contains(rows, r) {
					continue
				}
				for k := r * rowBytes; k < (r+1)*rowBytes; k += 2 {
					binary.LittleEndian.PutUint16(info.Data[k:], 0x7fc0) // a bf16 NaN
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestNonFiniteNeverAnswered runs checkpoints with NaN weights: no
// probability may be NaN; the request fails with a *NonFiniteError naming
// the question instead. With NaN in one token's embedding row only, requests
// that use the token fail and the others are answered as by the intact
// model, in the same batch.
func TestNonFiniteNeverAnswered(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	open := func(dir string) *Engine {
		e, err := Open(dir, be, Options{CacheLimit: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	parse := func(js string) *Request {
		r, err := ParseJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	zebra := parse(`{"evidence": {"animal": "horse"}, "questions": {"plain": {"type": "noul", "instructions": "Is it an animal?"}, "zebra": {"type": "choice", "instructions": "Is it a zebra?", "criteria": {"y": "yes, a zebra", "n": "no"}}}}`)
	wide := parse(`{"evidence": {"animal": "horse"}, "questions": {"w": {"type": "score", "instructions": "How sure?", "criteria": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u","v","w","x","y","z","zebra"]}}}`)
	plain := parse(`{"evidence": {"animal": "horse"}, "questions": {"plain": {"type": "noul", "instructions": "Is it an animal?"}}}`)

	check := func(name string, err error, question string) {
		t.Helper()
		var nf *NonFiniteError
		if !errors.As(err, &nf) || nf.Question != question || nf.Value != "NaN" || IsBadRequest(err) ||
			!strings.Contains(err.Error(), "model produces non-finite logits (NaN); the checkpoint is damaged") {
			t.Errorf("%s: %v, want a *NonFiniteError for question %q", name, err, question)
		}
	}

	// The final norm all NaN: every question of every request.
	e := open(nanDemo(t, "model.norm.weight", nil))
	resps, errs := e.DecideBatch(context.Background(), []*Request{zebra, plain, wide})
	for i, q := range []string{"plain", "plain", "w"} {
		if resps[i] != nil {
			t.Errorf("request %d answered from NaN weights: %+v", i, resps[i].Answers)
		}
		check("NaN norm", errs[i], q)
	}

	// One embedding row NaN: a token of " zebra" that the plain request's
	// rows lack poisons the rows that hold it, wide-choice stages included.
	intact := open(demoDir())
	rowsOf := func(r *Request) [][]int32 {
		var rows [][]int32
		for _, qj := range intact.fam.prepare(r).(*job).qs {
			rows = append(rows, qj.first...)
		}
		return rows
	}
	holds := func(rows [][]int32, id int32) bool {
		return slices.ContainsFunc(rows, func(ids []int32) bool { return slices.Contains(ids, id) })
	}
	poison := int32(-1)
	for _, id := range intact.tok.Encode(" zebra") {
		if !holds(rowsOf(plain), id) && holds(rowsOf(zebra)[1:], id) && holds(rowsOf(wide), id) && !holds(rowsOf(zebra)[:1], id) {
			poison = id
			break
		}
	}
	if poison < 0 {
		t.Fatal("no token of \" zebra\" is only in the zebra rows")
	}
	e = open(nanDemo(t, "model.embed_tokens.weight", []int{int(poison)}))
	resps, errs = e.DecideBatch(context.Background(), []*Request{zebra, plain, wide})
	check("NaN token, zebra", errs[0], "zebra")
	check("NaN token, wide", errs[2], "w")
	want, err := intact.Decide(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if errs[1] != nil {
		t.Fatalf("plain request beside the poisoned ones: %v", errs[1])
	}
	for i, p := range resps[1].Answers[0].Probs {
		if math.Abs(p-want.Answers[0].Probs[i]) > 1e-6 {
			t.Errorf("plain request: probs %v, want %v", resps[1].Answers[0].Probs, want.Answers[0].Probs)
			break
		}
	}
}

func TestCheckAnswers(t *testing.T) {
	for _, c := range []struct {
		probs []float64
		want  string
	}{{[]float64{0.5, 0.5}, ""}, {[]float64{0.5, math.NaN()}, "NaN"}, {[]float64{math.Inf(1), 0}, "+Inf"}, {[]float64{math.Inf(-1)}, "-Inf"}} {
		err := checkAnswers(Answers{{Name: "a"}, {Name: "q", Probs: c.probs}})
		var nf *NonFiniteError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.probs, err)
		case c.want != "" && (!errors.As(err, &nf) || nf.Value != c.want || nf.Question != "q" || nf.What != "probabilities"):
			t.Errorf("%v: %v, want %s for question q", c.probs, err, c.want)
		}
	}
}
