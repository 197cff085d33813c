package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/decide"
)

// recordingEngine is an Engine that records the requests prepared on it.
type recordingEngine struct {
	Engine
	mu   sync.Mutex
	reqs []*decide.Request
}

func (e *recordingEngine) Prepare(r *decide.Request) (Job, error) {
	e.mu.Lock()
	e.reqs = append(e.reqs, r)
	e.mu.Unlock()
	return e.Engine.Prepare(r)
}

// pageShape describes a request as "rows N: types", N the length of its
// evidence's rows list (0 when it has none).
func pageShape(t *testing.T, r *decide.Request) string {
	t.Helper()
	js, err := json.Marshal(r.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Rows []json.RawMessage `json:"rows"`
	}
	_ = json.Unmarshal(js, &ev) // evidence that is no object has no rows
	var types []string
	for _, q := range r.Questions {
		types = append(types, string(q.Type))
	}
	return fmt.Sprintf("rows %d: %s", len(ev.Rows), strings.Join(types, " "))
}

// TestWarmUpShapes checks that warm-up runs, after the short requests, the
// pages of 4, 40 and 160 rows with one question and with three (noul,
// choice, score), each alone.
func TestWarmUpShapes(t *testing.T) {
	rec := &recordingEngine{Engine: &fakeEngine{}}
	if err := warmUp(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rec.reqs {
		got = append(got, pageShape(t, r))
	}
	short := 2 * len(decide.WarmUpRequests()) // alone, then together
	want := []string{
		"rows 4: noul", "rows 4: noul choice score",
		"rows 40: noul", "rows 40: noul choice score",
		"rows 160: noul", "rows 160: noul choice score",
	}
	if len(got) != short+len(want) || !slices.Equal(got[short:], want) {
		t.Errorf("warm-up requests:\n%s\nwant %d short ones, then:\n%s", strings.Join(got, "\n"), short, strings.Join(want, "\n"))
	}
	for i, s := range got[:min(short, len(got))] {
		if !strings.HasPrefix(s, "rows 0: ") {
			t.Errorf("warm-up request %d is %s, want a short one first", i, s)
		}
	}
}

// TestWarmUpPagesFitTheDemo checks that the demo model takes every warm-up
// page (warm-up skips a shape a model refuses, so a refused one would warm
// nothing), and that warm-up leaves no prefix state behind.
func TestWarmUpPagesFitTheDemo(t *testing.T) {
	eng, _, err := DecideLoader(LoaderOptions{})(context.Background(), "", false, func(done, total int64) {})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, rows := range warmUpPages {
		for _, three := range []bool{false, true} {
			r, err := decide.ParseJSON([]byte(warmUpPage(rows, three)))
			if err != nil {
				t.Fatalf("page of %d rows: %v", rows, err)
			}
			j, err := eng.Prepare(r)
			if err != nil {
				t.Fatalf("the demo refuses the warm-up page of %d rows (%d questions): %v", rows, len(r.Questions), err)
			}
			t.Logf("page of %d rows, %d questions: %d tokens", rows, len(r.Questions), j.Tokens())
		}
	}
	if err := warmUp(context.Background(), eng); err != nil {
		t.Fatal(err)
	}
	if used, _ := eng.CacheStats(); used != 0 {
		t.Errorf("warm-up left %d bytes of prefix states", used)
	}
}

// pageRequest is a page of rows like warmUpPage's, of other content (seed
// picks it), with three questions.
func pageRequest(tb testing.TB, rows, seed int) *decide.Request {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"evidence":{"page":"stock count","rows":[`)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":"unit %d","bin":"%c","qty":%d}`, (i*11+seed*31)%89, 'E'+rune((i+seed)%4), (i*7+seed)%19)
	}
	b.WriteString(`]},"questions":{"a":{"type":"noul","instructions":"Is every item on this page in stock?"},` +
		`"b":{"type":"choice","instructions":"Which bin is fullest?","criteria":{"E":"bin E","F":"bin F","other":"another bin"}},` +
		`"c":{"type":"score","instructions":"How much stock is there?","criteria":["none","little","plenty"]}}}`)
	r, err := decide.ParseJSON([]byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// BenchmarkFirstPageAfterReady loads the demo model on the CPU backend,
// warms it up as a load does (or not: sub-benchmark cold), then answers two
// 160-row pages of three questions it has not seen, and reports the first's
// time over the second's (first/second; the goal is at most 1.5
// after warm-up). Each iteration is one load.
func BenchmarkFirstPageAfterReady(b *testing.B) {
	for _, warm := range []bool{true, false} {
		name := "warm"
		if !warm {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			var ratios []float64
			for i := range b.N {
				b.StopTimer()
				ctx := context.Background()
				eng, _, err := DecideLoader(LoaderOptions{})(ctx, "", false, func(done, total int64) {}) // the CPU backend
				if err != nil {
					b.Fatal(err)
				}
				if warm {
					if err := warmUp(ctx, eng); err != nil {
						b.Fatal(err)
					}
				}
				var took [2]float64
				for k := range took {
					j, err := eng.Prepare(pageRequest(b, 160, 2*i+k+1))
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					b.StartTimer()
					_, errs := eng.Run(ctx, []Job{j}, nil, 0)
					b.StopTimer()
					took[k] = time.Since(start).Seconds()
					if errs[0] != nil {
						b.Fatal(errs[0])
					}
				}
				eng.Close()
				ratios = append(ratios, took[0]/took[1])
				b.Logf("%s, load %d: first %.0f ms, second %.0f ms, ratio %.2f", name, i, took[0]*1e3, took[1]*1e3, took[0]/took[1])
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "first/second(median)")
			b.ReportMetric(ratios[0], "first/second(min)")
			b.ReportMetric(ratios[len(ratios)-1], "first/second(max)")
		})
	}
}
