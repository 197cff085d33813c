package decide

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/startlux/startlux/value"
)

// pageRequest builds a request about a page of n rows with the questions
// given as JSON (name → question).
func pageRequest(t testing.TB, seed, n int, questions string) *Request {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "Row %d: item %d, qty %d. ", i, (i*7+seed)%13, (i*31+seed*5)%17)
	}
	body := fmt.Sprintf(`{"evidence": {"page": %q, "seed": %d}, "questions": %s}`, b.String(), seed, questions)
	r, err := ParseJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wideCriteria(n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, fmt.Sprintf(`"c%d": "city number %d"`, i, i))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

var fourQuestions = `{"q0": {"type": "noul", "instructions": "Does row 6 exist?"},
	"q1": {"type": "score", "instructions": "How much is on the page?", "criteria": ["empty", "some", "full"]},
	"q2": {"type": "choice", "instructions": "Which city?", "criteria": ` + wideCriteria(32) + `},
	"q3": {"type": "noul", "instructions": "Is any item out of stock?"}}`

// rowsOf records the full ids of the rows a request ran, by question, in
// the order they ran.
type rowLog struct {
	mu   sync.Mutex
	rows map[*Request][][]int32
}

func (l *rowLog) attach(e *Engine) {
	l.rows = map[*Request][][]int32{}
	jevfmtOf(e).trace = func(r *Request, q *Question, ids []int32, z []float32) {
		l.mu.Lock()
		l.rows[r] = append(l.rows[r], append([]int32(nil), ids...))
		l.mu.Unlock()
	}
}

func sameProbs(t *testing.T, what string, a, b *Response, tol float64) {
	t.Helper()
	if len(a.Answers) != len(b.Answers) {
		t.Fatalf("%s: %d answers vs %d", what, len(a.Answers), len(b.Answers))
	}
	worst := 0.0
	for i := range a.Answers {
		for j := range a.Answers[i].Probs {
			worst = math.Max(worst, math.Abs(a.Answers[i].Probs[j]-b.Answers[i].Probs[j]))
		}
	}
	if worst > tol {
		t.Errorf("%s: probabilities differ by %.3g (tolerance %g)", what, worst, tol)
	}
}

// TestPrefixPlanAgrees runs one request cold, warm, inside a batch with
// others and with the store disabled, and checks the probabilities agree and
// tokens and cached_tokens follow format.md, computed here from the rows.
func TestPrefixPlanAgrees(t *testing.T) {
	ctx := context.Background()
	e := openDemo(t, Options{})
	var log rowLog
	log.attach(e)
	req := pageRequest(t, 1, 40, fourQuestions)

	cold, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rows := log.rows[req]
	// 32 options → two groups of 16, then a row of the 6 survivors.
	if len(rows) != 3+3 {
		t.Fatalf("%d rows ran, want 6", len(rows))
	}
	// The shared prefix: the token-level common prefix of all rows (the
	// later wide row shares it too).
	c := len(rows[0])
	for _, r := range rows[1:] {
		c = min(c, commonPrefix(rows[0], r))
	}
	pre := e.Info().PreambleTokens
	if pre < 20 || c < pre+300 {
		t.Fatalf("preamble %d, common prefix %d: the test needs long evidence", pre, c)
	}
	sumRest := 0
	for _, r := range rows {
		sumRest += len(r) - c
	}
	if cold.CachedTokens != pre || cold.Tokens != (c-pre)+sumRest {
		t.Errorf("cold: tokens %d cached %d, want %d and %d", cold.Tokens, cold.CachedTokens, (c-pre)+sumRest, pre)
	}
	used, limit := e.CacheStats()
	if used <= 0 || used > limit {
		t.Errorf("cache stats %d / %d after a kept prefix", used, limit)
	}

	warm, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sameProbs(t, "warm vs cold", warm, cold, 1e-5)
	if warm.CachedTokens != c || warm.Tokens != sumRest {
		t.Errorf("warm: tokens %d cached %d, want %d and %d", warm.Tokens, warm.CachedTokens, sumRest, c)
	}

	// A single question about the same evidence starts from the kept prefix.
	one := pageRequest(t, 1, 40, `{"only": {"type": "noul", "instructions": "Is row 3 there?"}}`)
	r1, err := e.Decide(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	oneRow := log.rows[one][0]
	if !isPrefix(rows[0][:c], oneRow) {
		t.Fatal("the single question's row does not start with the kept prefix")
	}
	if r1.CachedTokens != c || r1.Tokens != len(oneRow)-c {
		t.Errorf("single question on kept evidence: tokens %d cached %d, want %d and %d", r1.Tokens, r1.CachedTokens, len(oneRow)-c, c)
	}

	// In a batch with others (new evidence, short evidence, a bad request).
	e.ClearCache()
	others := []*Request{
		pageRequest(t, 2, 30, fourQuestions),
		req,
		pageRequest(t, 3, 2, `{"a": {"type": "noul", "instructions": "Is it there?"}}`),
		{Evidence: value.Value{}, Questions: []Question{{Name: "bad", Type: "rank", Instructions: "x"}}},
	}
	rs, errs := e.DecideBatch(ctx, others)
	for i, err := range errs {
		if (err != nil) != (i == 3) {
			t.Fatalf("batch request %d: error %v", i, err)
		}
	}
	sameProbs(t, "batch vs cold", rs[1], cold, 1e-5)
	if rs[1].Tokens != cold.Tokens || rs[1].CachedTokens != cold.CachedTokens {
		t.Errorf("batch (cache cleared): tokens %d cached %d, want the cold %d and %d", rs[1].Tokens, rs[1].CachedTokens, cold.Tokens, cold.CachedTokens)
	}
	// The short request shares too little to run a prefix: every row from
	// the preamble.
	short := log.rows[others[2]]
	if rs[2].CachedTokens != pre || rs[2].Tokens != len(short[0])-pre {
		t.Errorf("short request: tokens %d cached %d, want %d and %d", rs[2].Tokens, rs[2].CachedTokens, len(short[0])-pre, pre)
	}

	// With the store disabled every run is cold.
	d := openDemo(t, Options{CacheLimit: -1})
	for i := 0; i < 2; i++ {
		r, err := d.Decide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		sameProbs(t, "store disabled vs cold", r, cold, 1e-5)
		if r.Tokens != cold.Tokens || r.CachedTokens != cold.CachedTokens {
			t.Errorf("store disabled, run %d: tokens %d cached %d, want %d and %d", i, r.Tokens, r.CachedTokens, cold.Tokens, cold.CachedTokens)
		}
	}
	if used, limit := d.CacheStats(); used != 0 || limit >= 0 {
		t.Errorf("disabled store reports %d / %d", used, limit)
	}
}

// TestSnapshotStoreLRU bounds the store to one snapshot's size and checks
// that the least recently used evidence goes.
func TestSnapshotStoreLRU(t *testing.T) {
	ctx := context.Background()
	probe := openDemo(t, Options{})
	a := pageRequest(t, 4, 30, fourQuestions)
	if _, err := probe.Decide(ctx, a); err != nil {
		t.Fatal(err)
	}
	one, _ := probe.CacheStats()
	e := openDemo(t, Options{CacheLimit: one + one/2})
	b := pageRequest(t, 5, 30, fourQuestions)
	ra, _ := e.Decide(ctx, a)
	ra2, _ := e.Decide(ctx, a)
	if ra2.CachedTokens <= ra.CachedTokens {
		t.Fatalf("second run of a is not warm: cached %d then %d", ra.CachedTokens, ra2.CachedTokens)
	}
	if _, err := e.Decide(ctx, b); err != nil { // evicts a
		t.Fatal(err)
	}
	if used, limit := e.CacheStats(); used > limit {
		t.Errorf("store holds %d bytes over its limit %d", used, limit)
	}
	rb, _ := e.Decide(ctx, b)
	ra3, _ := e.Decide(ctx, a)
	if rb.CachedTokens == ra.CachedTokens || ra3.CachedTokens != ra.CachedTokens {
		t.Errorf("after b: b cached %d (want warm), a cached %d (want cold %d)", rb.CachedTokens, ra3.CachedTokens, ra.CachedTokens)
	}
	sameProbs(t, "a after eviction", ra3, ra, 1e-5)
}

// TestConcurrentDecide runs requests from several goroutines at once.
func TestConcurrentDecide(t *testing.T) {
	ctx := context.Background()
	e := openDemo(t, Options{CacheLimit: 1}) // keeps nothing: snapshots freed while others run
	reqs := []*Request{pageRequest(t, 6, 25, fourQuestions), pageRequest(t, 7, 3, fourQuestions)}
	var want []*Response
	for _, r := range reqs {
		resp, err := e.Decide(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, resp)
	}
	e2 := openDemo(t, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 2; k++ {
				i := (g + k) % len(reqs)
				resp, err := e2.Decide(ctx, reqs[i])
				if err != nil {
					t.Error(err)
					return
				}
				sameProbs(t, fmt.Sprintf("goroutine %d request %d", g, i), resp, want[i], 1e-5)
			}
		}(g)
	}
	wg.Wait()
}

// TestCancelled checks a cancelled context stops a request with its error.
func TestCancelled(t *testing.T) {
	e := openDemo(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs, errs := e.DecideBatch(ctx, []*Request{pageRequest(t, 8, 40, fourQuestions), pageRequest(t, 9, 2, fourQuestions)})
	for i := range rs {
		if rs[i] != nil || errs[i] == nil || !errors.Is(errs[i], context.Canceled) {
			t.Errorf("request %d: response %v, error %v; want context.Canceled", i, rs[i], errs[i])
		}
	}
	if used, _ := e.CacheStats(); used != 0 {
		t.Errorf("a cancelled request left %d bytes in the store", used)
	}
}
