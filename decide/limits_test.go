package decide

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/value"
)

// questionsJSON returns n noul questions q0..q(n-1) as a JSON object.
func questionsJSON(n int, instructions string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"q%d": {"type": "noul", "instructions": "%s %d?"}`, i, instructions, i)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// words returns n different short words separated by spaces.
func words(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%dx ", i*7919%100000)
	}
	return b.String()
}

// TestRequestLimits checks each per-request limit at and over its value:
// a request over one is a bad request naming the limit and what it found,
// refused before anything runs; one at it is prepared, and its token count is
// that of its rows.
func TestRequestLimits(t *testing.T) {
	e := openDemo(t, Options{CacheLimit: -1})
	small := openDemo(t, Options{CacheLimit: -1, Limits: Limits{MaxQuestions: 3, MaxRequestTokens: 400}})
	lim := e.Limits()
	if lim.MaxQuestions != 256 || lim.MaxRequestTokens != 262144 || lim.MaxEvidenceTokens != 4096 {
		t.Fatalf("limits %+v, want 256 questions, 262144 request tokens, the demo's 4096 positions", lim)
	}
	huge := strings.Repeat("x", 16<<20)
	cases := []struct {
		name string
		e    *Engine
		body string
		want string // "" = accepted
	}{
		{"256 questions", e, `{"evidence": {"a": 1}, "questions": ` + questionsJSON(256, "Is it") + `}`, ""},
		{"257 questions", e, `{"evidence": {"a": 1}, "questions": ` + questionsJSON(257, "Is it") + `}`,
			"questions: 257 questions; a request may ask at most 256 (max_questions)"},
		{"4 questions, limit 3", small, `{"evidence": {"a": 1}, "questions": ` + questionsJSON(4, "Is it") + `}`,
			"4 questions; a request may ask at most 3 (max_questions)"},
		{"16 MiB of evidence", e, `{"evidence": {"note": "` + huge + `"}, "questions": ` + questionsJSON(1, "Is it") + `}`,
			"evidence: too long: its text is at least 16777222 bytes, so more than the 4096 tokens the model takes (max_evidence_tokens)"},
		{"5000 words of evidence", e, `{"evidence": "` + words(5000) + `", "questions": ` + questionsJSON(1, "Is it") + `}`,
			"evidence: too long: at least"},
		{"rows over the request's tokens", e, `{"evidence": "` + words(300) + `", "questions": ` + questionsJSON(200, "Is it") + `}`,
			"the request renders more than 262144 tokens"},
		{"rows over a small request limit", small, `{"evidence": "` + words(100) + `", "questions": ` + questionsJSON(3, "Is it") + `}`,
			"the request renders more than 400 tokens"},
		{"one word too long to tokenise", openDemo(t, Options{CacheLimit: -1, Limits: Limits{}}), `{"evidence": 1, "questions": {"q": {"type": "noul", "instructions": "` + strings.Repeat("y", 2<<20) + `"}}}`,
			"question \"q\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseJSON([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p, err := c.e.Prepare(r)
			runtime.ReadMemStats(&after)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, qj := range p.job.(*job).qs {
					for _, ids := range qj.first {
						n += len(ids)
					}
				}
				if p.Tokens() != n || n == 0 {
					t.Errorf("Tokens() = %d, the rows hold %d", p.Tokens(), n)
				}
				return
			}
			if err == nil || !IsBadRequest(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a bad request saying %q", err, c.want)
			}
			// Refused without rendering or tokenising much: a few MB of
			// work whatever the request's size (the 16 MiB evidence is not
			// copied).
			if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
				t.Errorf("refusing it allocated %d MB", got>>20)
			}
		})
	}
}

// TestMaxValues: many values in a small document; the msgpack parser (the
// daemon's) stops at MaxValues. (The JSON parser counts the same way.)
func TestMaxValues(t *testing.T) {
	arr := make([]int, value.MaxValues+1)
	body, err := msgpack.Marshal(map[string]any{"evidence": arr, "questions": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseMsgpack(body); err == nil || !strings.Contains(err.Error(), "more than 1048576 values in the document (max_values)") {
		t.Errorf("a request of %d values: %v", value.MaxValues+2, err)
	}
}

// TestPointerLongBranchBlamed: a pointer/1 question whose options alone
// make its row too long is blamed, not the small evidence.
func TestPointerLongBranchBlamed(t *testing.T) {
	e := openPointerEngine(t, pointerDir(), Options{})
	var crit []string
	for i := range 256 {
		crit = append(crit, fmt.Sprintf(`"c%d": "option number %d of many"`, i, i))
	}
	r, err := ParseJSON([]byte(`{"evidence": {"x": "y"}, "questions": {"pick": {"type": "choice", "instructions": "Which?", "criteria": {` + strings.Join(crit, ", ") + `}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Decide(context.Background(), r)
	if err == nil || !IsBadRequest(err) || !strings.Contains(err.Error(), `question "pick": criteria: its rows reach at least`) || strings.Contains(err.Error(), "evidence: too long") {
		t.Errorf("got %v, want the question blamed", err)
	}
}

// TestPassTokens answers golden requests with passes of at most 64
// tokens, each asked for as a turn: the answers must be those of the
// default passes, and no pass may be longer.
func TestPassTokens(t *testing.T) {
	whole := openDemo(t, Options{CacheLimit: -1})
	sliced := openDemo(t, Options{CacheLimit: -1})
	var cases []decideCase
	for i, c := range loadDecideCases(t) {
		if i%3 == 0 { // a third of them keeps the test short
			cases = append(cases, c)
		}
	}
	var mu sync.Mutex
	turns, longest := 0, 0
	turn := func(ctx context.Context, tokens int) (func(), error) {
		mu.Lock()
		turns++
		longest = max(longest, tokens)
		mu.Unlock()
		return func() {}, nil
	}
	var ps []*Prepared
	var reqs []*Request
	for _, c := range cases {
		p, err := sliced.Prepare(c.req)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		reqs = append(reqs, c.req)
	}
	got, errs := sliced.DecidePrepared(context.Background(), ps, turn, 64)
	want, werrs := whole.DecideBatch(context.Background(), reqs)
	for i := range cases {
		if errs[i] != nil || werrs[i] != nil {
			t.Fatalf("case %d: %v / %v", i, errs[i], werrs[i])
		}
		for k, a := range got[i].Answers {
			for o, p := range a.Probs {
				if math.Abs(p-want[i].Answers[k].Probs[o]) > 1e-5 {
					t.Errorf("case %d %s: probs %v in 64-token passes, %v in whole ones", i, a.Name, a.Probs, want[i].Answers[k].Probs)
					break
				}
			}
		}
	}
	if longest > 64 || turns < len(cases) {
		t.Errorf("%d turns, the longest pass %d tokens: want passes of at most 64", turns, longest)
	}
	// A prepared request belongs to its engine.
	p, err := whole.Prepare(cases[0].req)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := sliced.DecidePrepared(context.Background(), []*Prepared{p}, nil, 0); errs[0] == nil {
		t.Error("a request prepared by another engine was answered")
	}
}
