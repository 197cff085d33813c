package decide

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// cityOptions are the options of the permutation tests' choice question.
var cityOptions = [][2]string{{"lima", "Lima"}, {"oslo", "Oslo"}, {"kyiv", "Kyiv"}, {"pune", "Pune"}, {"riga", "Riga"}}

// rotated returns opts rotated left by s: opts[s], …, opts[s-1].
func rotated[T any](opts []T, s int) []T {
	return append(append([]T(nil), opts[s:]...), opts[:s]...)
}

// choiceJSON is a choice question over opts as JSON, with extra fields.
func choiceJSON(instructions string, opts [][2]string, extra string) string {
	var parts []string
	for _, o := range opts {
		parts = append(parts, fmt.Sprintf("%q: %q", o[0], o[1]))
	}
	return fmt.Sprintf(`{"type": "choice", "instructions": %q, "criteria": {%s}%s}`, instructions, strings.Join(parts, ", "), extra)
}

// scoreJSON is a score question over levels as JSON.
func scoreJSON(instructions string, levels []string, extra string) string {
	var parts []string
	for _, l := range levels {
		parts = append(parts, fmt.Sprintf("%q", l))
	}
	return fmt.Sprintf(`{"type": "score", "instructions": %q, "criteria": [%s]%s}`, instructions, strings.Join(parts, ", "), extra)
}

// probsByLabel maps an answer's probabilities to its options' labels.
func probsByLabel(t *testing.T, q *Question, a *Answer) map[string]float64 {
	t.Helper()
	opts, err := q.Options()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for i, o := range opts {
		m[o.Label] = a.Probs[i]
	}
	return m
}

// labelOf returns the label of the answer's chosen option.
func labelOf(t *testing.T, q *Question, a *Answer) string {
	t.Helper()
	opts, _ := q.Options()
	for _, o := range opts {
		if fmt.Sprint(o.ID) == fmt.Sprint(a.Answer) {
			return o.Label
		}
	}
	t.Fatalf("answer %v is not an option", a.Answer)
	return ""
}

// TestPermuteRotationInvariant: with permute the answer and the
// probabilities of each option are the same for every rotation of the
// option order the client sends (choice and score questions, both checkpoint
// families, snapshot path and store disabled).
func TestPermuteRotationInvariant(t *testing.T) {
	levels := []string{"empty", "some", "half", "full"}
	engines := []struct {
		name string
		e    *Engine
	}{
		{"jevfmt", openDemo(t, Options{})},
		{"jevfmt no store", openDemo(t, Options{CacheLimit: -1})},
		{"pointer", openPointerEngine(t, pointerDir(), Options{})},
		{"pointer rows", openPointerEngine(t, pointerDir(), Options{RowForm: true})},
	}
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			var first map[string]map[string]float64
			var firstAns map[string]string
			for s := range len(cityOptions) {
				qs := fmt.Sprintf(`{"city": %s, "level": %s}`,
					choiceJSON("Which city is named?", rotated(cityOptions, s), ""),
					scoreJSON("How full is the page?", rotated(levels, s%len(levels)), ""))
				req := pageRequest(t, 3, 30, qs)
				req.Permute = true
				resp, err := en.e.Decide(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]map[string]float64{}
				ans := map[string]string{}
				for i := range req.Questions {
					q := &req.Questions[i]
					a := resp.Answers.Get(q.Name)
					got[q.Name] = probsByLabel(t, q, a)
					ans[q.Name] = labelOf(t, q, a)
				}
				if s == 0 {
					first, firstAns = got, ans
					continue
				}
				for name, m := range got {
					if ans[name] != firstAns[name] {
						t.Errorf("rotation %d, %s: answer %q, rotation 0 answered %q", s, name, ans[name], firstAns[name])
					}
					for label, p := range m {
						if d := math.Abs(p - first[name][label]); d > 1e-5 {
							t.Errorf("rotation %d, %s, %q: p %.7f, rotation 0 gave %.7f", s, name, label, p, first[name][label])
						}
					}
				}
			}
		})
	}
}

// TestPermuteIsTheRotatedRows checks a permuted question against a second
// path: a request of n plain questions, question k showing the options
// rotated by k. Those are the very rows permute adds, so tokens and
// cached_tokens must match, the rows' letter logits must match the
// permuted answer's Scores, and the permuted probabilities must be the
// softmax of each option's logit averaged over the rows (computed here).
func TestPermuteIsTheRotatedRows(t *testing.T) {
	for _, evRows := range []int{1, 30} { // short evidence, and long enough to run once as a prefix
		t.Run(fmt.Sprintf("evidence rows %d", evRows), func(t *testing.T) {
			ctx := context.Background()
			e := openDemo(t, Options{CacheLimit: -1})
			perm := pageRequest(t, 5, evRows, `{"q": `+choiceJSON("Which city is named?", cityOptions, `, "permute": true`)+`}`)
			var parts []string
			for k := range cityOptions {
				parts = append(parts, fmt.Sprintf("%q: %s", fmt.Sprint("q", k), choiceJSON("Which city is named?", rotated(cityOptions, k), "")))
			}
			plain := pageRequest(t, 5, evRows, "{"+strings.Join(parts, ", ")+"}")
			pr, err := e.Decide(ctx, perm)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := e.Decide(ctx, plain)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Tokens != rr.Tokens || pr.CachedTokens != rr.CachedTokens {
				t.Errorf("permuted: tokens %d cached %d; the rotated questions: tokens %d cached %d", pr.Tokens, pr.CachedTokens, rr.Tokens, rr.CachedTokens)
			}
			a := pr.Answers.Get("q")
			n := len(cityOptions)
			if len(a.Scores) != n {
				t.Fatalf("%d score rows, want %d", len(a.Scores), n)
			}
			mean := make([]float64, n)
			for k := range n {
				z := rr.Answers[k].Scores[0]
				if fmt.Sprint(z) != fmt.Sprint(a.Scores[k]) {
					t.Errorf("shift %d: letter logits %v, the rotated question's %v", k, a.Scores[k], z)
				}
				for j := range n { // letter j of row k shows option (j+k) mod n
					mean[(j+k)%n] += float64(z[j]) / float64(n)
				}
			}
			T := e.Config().TemperatureByType["choice"]
			var sum float64
			want := make([]float64, n)
			for i := range n {
				want[i] = math.Exp(mean[i] / T)
				sum += want[i]
			}
			for i := range n {
				if d := math.Abs(a.Probs[i] - want[i]/sum); d > 1e-9 {
					t.Errorf("option %d: p %.9f, want %.9f", i, a.Probs[i], want[i]/sum)
				}
			}
		})
	}
}

// TestPositionPrior: the readout subtracts the log of the position prior of
// the row's type and option count before the softmax (checked against the
// row's letter logits), leaves types and counts without one alone, and
// changes nothing for a permuted question.
func TestPositionPrior(t *testing.T) {
	ctx := context.Background()
	e := openDemo(t, Options{CacheLimit: -1})
	qs := `{"c": ` + choiceJSON("Which city is named?", cityOptions[:4], "") +
		`, "n": {"type": "noul", "instructions": "Is a city named?"}}`
	req := pageRequest(t, 7, 2, qs)
	plain, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Permute = true
	plainPerm, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	req.Permute = false

	prior := []float64{0.7, 0.1, 0.1, 0.1}
	cfg := *jevfmtOf(e).cfg
	cfg.PositionPrior = map[string]map[string][]float64{"choice": {"4": prior}, "score": {"3": {0.2, 0.3, 0.5}}}
	jevfmtOf(e).cfg = &cfg
	withPrior, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	a := withPrior.Answers.Get("c")
	z := a.Scores[0]
	T := cfg.TemperatureByType["choice"]
	want := make([]float64, 4)
	var sum float64
	for j := range want {
		want[j] = math.Exp((float64(z[j]) - math.Log(prior[j])) / T)
		sum += want[j]
	}
	for j := range want {
		if d := math.Abs(a.Probs[j] - want[j]/sum); d > 1e-12 {
			t.Errorf("choice option %d: p %.12f, want %.12f", j, a.Probs[j], want[j]/sum)
		}
	}
	if fmt.Sprint(withPrior.Answers.Get("n").Probs) != fmt.Sprint(plain.Answers.Get("n").Probs) {
		t.Errorf("noul has no prior but its probabilities moved: %v vs %v", withPrior.Answers.Get("n").Probs, plain.Answers.Get("n").Probs)
	}
	req.Permute = true
	perm, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sameProbs(t, "permuted, with and without a prior", perm, plainPerm, 1e-12)
}

// TestPermuteRefusals: permuting a question wider than 25 options is a bad
// request naming the question and the count; a question's own permute wins
// over the request's.
func TestPermuteRefusals(t *testing.T) {
	wide := `{"type": "choice", "instructions": "Which?", "criteria": ` + wideCriteria(26) + `}`
	body := `{"evidence": 1, "permute": true, "questions": {"ok": {"type": "noul", "instructions": "Is it?"}, "wide": ` + wide + `}}`
	_, err := ParseJSON([]byte(body))
	re, ok := err.(*RequestError)
	if !ok || re.Question != "wide" || re.Field != "permute" || !strings.Contains(re.Message, "26 options") || !strings.Contains(re.Message, "at most 25") {
		t.Fatalf("got %v, want a permute error about question wide's 26 options", err)
	}
	body = strings.Replace(body, `"Which?", `, `"Which?", "permute": false, `, 1)
	r, err := ParseJSON([]byte(body))
	if err != nil {
		t.Fatalf("the wide question opts out of permute: %v", err)
	}
	if !r.Permuted(&r.Questions[0]) || r.Permuted(&r.Questions[1]) {
		t.Errorf("permuted: ok %v wide %v, want true false", r.Permuted(&r.Questions[0]), r.Permuted(&r.Questions[1]))
	}
	// The flag survives the round trip through JSON and msgpack.
	js := requestJSON(t, r)
	back, err := ParseJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Permute || back.Questions[0].Permute != nil || back.Questions[1].Permute == nil || *back.Questions[1].Permute {
		t.Errorf("after JSON: %s", js)
	}
	// A model whose groups are narrower than the question refuses it.
	e := openDemo(t, Options{})
	cfg := *jevfmtOf(e).cfg
	cfg.WideChoice.Group, cfg.WideChoice.Keep = 4, 2
	jevfmtOf(e).cfg = &cfg
	req := pageRequest(t, 1, 1, `{"c": `+choiceJSON("Which city?", cityOptions, `, "permute": true`)+`}`)
	_, err = e.Decide(context.Background(), req)
	if re, ok := err.(*RequestError); !ok || re.Question != "c" || !strings.Contains(re.Message, "5 options") {
		t.Errorf("group 4, 5 options permuted: got %v", err)
	}
}

// TestTemperatureKeepsArgmax: dividing the scores by any temperature keeps
// the most probable option (ties to the earliest), on scores made from
// float32 logits as the readout's are.
func TestTemperatureKeepsArgmax(t *testing.T) {
	argmax := func(x []float64) int {
		b := 0
		for i, v := range x {
			if v > x[b] {
				b = i
			}
		}
		return b
	}
	seed := uint64(1)
	next := func() float64 { // xorshift: a fixed sequence in [0, 1)
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return float64(seed>>11) / (1 << 53)
	}
	for trial := range 20000 {
		n := 2 + trial%24
		z := make([]float32, n)
		for i := range z {
			z[i] = float32(next()*60 - 30)
			if trial%5 == 0 && i > 0 && next() < 0.3 {
				z[i] = z[i-1] // ties
			}
		}
		a := rotatedMean([][]float32{z}, nil)
		T := math.Exp(next()*math.Log(400) - math.Log(20)) // 0.05 .. 20
		if got, want := argmax(Softmax(a, T)), argmax(a); got != want {
			t.Fatalf("trial %d: T %g moved the argmax from %d to %d (scores %v)", trial, T, want, got, a)
		}
	}
}
