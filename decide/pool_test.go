package decide

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

// poolShapes returns requests of many shapes: pages of 1 to 130 rows, with
// one to five questions of every type, the longer pages also with a wide
// choice; no two alike, so each makes passes of new sizes.
func poolShapes() []*Request {
	var out []*Request
	for i, rows := range []int{1, 3, 7, 12, 20, 33, 50, 64, 90, 110, 130} {
		var b strings.Builder
		b.WriteString(`{"evidence": {"page": [`)
		for r := range rows {
			if r > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"item": "part %d-%d", "qty": %d, "bin": "%c%d"}`, i, r, (r*7+i)%13, 'A'+r%6, r%9)
		}
		b.WriteString(`]}, "questions": {`)
		qs := []string{
			`"empty": {"type": "noul", "instructions": "Is any part out of stock?"}`,
			`"level": {"type": "score", "instructions": "How full is the page?", "criteria": ["empty", "some", "half", "most", "full"]}`,
			`"bin": {"type": "choice", "instructions": "Which bin holds the first part?", "criteria": {"a": "A", "b": "B", "c": "C"}}`,
			`"many": {"type": "noul", "instructions": "Are there more than ten parts?"}`,
		}
		if rows >= 50 {
			var opts []string
			for k := range 30 {
				opts = append(opts, fmt.Sprintf(`"o%d": "bin %c%d"`, k, 'A'+k%6, k%9))
			}
			qs = append(qs, `"which": {"type": "choice", "instructions": "Which bin is the busiest?", "criteria": {`+strings.Join(opts, ", ")+`}}`)
		}
		b.WriteString(strings.Join(qs[:1+i%len(qs)], ", "))
		b.WriteString("}}")
		r, err := ParseJSON([]byte(b.String()))
		if err != nil {
			panic(err)
		}
		out = append(out, r)
	}
	return out
}

// TestPoolBound answers requests of many shapes on a CPU backend whose pool
// of freed buffers is bounded to 1 MiB: after every request the pool holds
// no more than that, it did keep buffers (it is not simply off), and every
// probability is what a backend keeping no buffers at all gives.
func TestPoolBound(t *testing.T) {
	checkPoolBound(t, func(limit int64) tensor.Backend {
		be, err := cpu.New(cpu.Options{PoolLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return be
	}, poolShapes(), 1e-9)
}

// checkPoolBound is TestPoolBound on the backends newBackend makes with a
// pool limit; the probabilities of the bounded backend must be within tol
// of those of one keeping nothing.
func checkPoolBound(t *testing.T, newBackend func(limit int64) tensor.Backend, reqs []*Request, tol float64) {
	t.Helper()
	const limit = 1 << 20
	open := func(limit int64) (*Engine, tensor.Pooler) {
		be := newBackend(limit)
		p, ok := be.(tensor.Pooler)
		if !ok {
			t.Fatalf("backend %s keeps no pool", be.Name())
		}
		e, err := Open(demoDir(), be, Options{CacheLimit: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e, p
	}
	bounded, pool := open(limit)
	none, nonePool := open(-1)
	var kept int64
	for i, r := range reqs {
		got, err := bounded.Decide(context.Background(), r)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		held, lim := pool.PoolStats()
		if lim != limit || held > limit {
			t.Fatalf("request %d: the pool holds %d bytes, limit %d (want at most %d)", i, held, lim, limit)
		}
		kept = max(kept, held)
		want, err := none.Decide(context.Background(), r)
		if err != nil {
			t.Fatalf("request %d without a pool: %v", i, err)
		}
		if h, _ := nonePool.PoolStats(); h != 0 {
			t.Fatalf("request %d: a pool limited to nothing holds %d bytes", i, h)
		}
		for k, a := range got.Answers {
			b := want.Answers[k]
			for j := range a.Probs {
				if math.Abs(a.Probs[j]-b.Probs[j]) > tol {
					t.Errorf("request %d, %s: p[%d] = %v with a bounded pool, %v without", i, a.Name, j, a.Probs[j], b.Probs[j])
				}
			}
		}
	}
	if kept < limit/4 {
		t.Errorf("the pool held at most %d bytes over %d requests: it is not being used", kept, len(reqs))
	}
	t.Logf("the pool held up to %d of %d bytes", kept, limit)
}
