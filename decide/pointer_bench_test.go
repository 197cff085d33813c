package decide

import (
	"context"
	"testing"
)

// benchPointerForm answers a 4-question request about a page of 100 rows
// (about 2,000 tokens of evidence) on a pointer/1 checkpoint around the demo
// base: cold (store cleared) or warm (the state kept), in the prefix or the
// row form.
func benchPointerForm(b *testing.B, rowForm, warm bool) {
	e := openPointerEngine(b, demoPointer(b), Options{RowForm: rowForm})
	r := pageRequest(b, 1, 100, fourQuestions)
	ctx := context.Background()
	if _, err := e.Decide(ctx, r); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if !warm {
			e.ClearCache()
		}
		if _, err := e.Decide(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPointerPrefixCold(b *testing.B) { benchPointerForm(b, false, false) }
func BenchmarkPointerPrefixWarm(b *testing.B) { benchPointerForm(b, false, true) }
func BenchmarkPointerRowForm(b *testing.B)    { benchPointerForm(b, true, false) }
