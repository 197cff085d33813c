package decide

import (
	"context"
	"testing"
)

// benchRequests are n single-question requests, each about its own short
// evidence (no shared prefix beyond the preamble).
func benchRequests(b testing.TB, n int) []*Request {
	qs := []string{
		`{"q": {"type": "noul", "instructions": "Does row 3 exist?"}}`,
		`{"q": {"type": "score", "instructions": "How much is on the page?", "criteria": ["empty", "some", "full"]}}`,
	}
	reqs := make([]*Request, n)
	for i := range reqs {
		reqs[i] = pageRequest(b, 100+i, 6, qs[i%len(qs)])
	}
	return reqs
}

// BenchmarkDecideOneByOne answers 64 single-question requests one Decide at a time.
func BenchmarkDecideOneByOne(b *testing.B) {
	e := openDemo(b, Options{})
	reqs := benchRequests(b, 64)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range reqs {
			if _, err := e.Decide(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecideBatch answers the same 64 requests with one DecideBatch.
func BenchmarkDecideBatch(b *testing.B) {
	e := openDemo(b, Options{})
	reqs := benchRequests(b, 64)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, errs := e.DecideBatch(ctx, reqs); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
}

// BenchmarkDecideWarm answers an 8-question request about kept evidence.
func BenchmarkDecideWarm(b *testing.B) {
	e := openDemo(b, Options{})
	r := pageRequest(b, 1, 120, fourQuestions)
	ctx := context.Background()
	if _, err := e.Decide(ctx, r); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Decide(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
