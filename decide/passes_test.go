package decide

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// passCost is the cost planPasses minimises, for the passes ending at ends.
func passCost(lens, ends []int) int {
	c, start := 0, 0
	for _, e := range ends {
		c += lens[start]*(e-start) + passOverheadTokens
		start = e
	}
	return c
}

// bruteBest tries every split of lens into consecutive passes.
func bruteBest(lens []int, maxTokens, maxRows int) int {
	n := len(lens)
	best := -1
	for mask := 0; mask < 1<<(n-1); mask++ {
		var ends []int
		for i := 1; i < n; i++ {
			if mask&(1<<(i-1)) != 0 {
				ends = append(ends, i)
			}
		}
		ends = append(ends, n)
		ok, start := true, 0
		for _, e := range ends {
			if e-start > 1 && (lens[start]*(e-start) > maxTokens || e-start > maxRows) {
				ok = false
			}
			start = e
		}
		if c := passCost(lens, ends); ok && (best < 0 || c < best) {
			best = c
		}
	}
	return best
}

func TestPlanPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		n := 1 + r.IntN(11)
		maxTokens := 64 + r.IntN(2000)
		lens := make([]int, n)
		for i := range lens {
			lens[i] = 1 + r.IntN(600)
			if trial%5 == 0 {
				lens[i] = 1 + r.IntN(3*maxTokens) // rows longer than a pass
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(lens)))
		maxRows := 1 + r.IntN(12)
		ends := planPasses(lens, maxTokens, maxRows)
		start := 0
		for _, e := range ends {
			if e <= start {
				t.Fatalf("lens %v: pass ends %v not increasing", lens, ends)
			}
			if e-start > 1 && lens[start]*(e-start) > maxTokens {
				t.Fatalf("lens %v max %d: pass %d..%d has %d padded tokens", lens, maxTokens, start, e, lens[start]*(e-start))
			}
			if e-start > maxRows {
				t.Fatalf("lens %v: pass %d..%d has %d rows, more than %d", lens, start, e, e-start, maxRows)
			}
			start = e
		}
		if start != n {
			t.Fatalf("lens %v: passes %v do not cover the %d rows", lens, ends, n)
		}
		if got, want := passCost(lens, ends), bruteBest(lens, maxTokens, maxRows); got != want {
			t.Fatalf("lens %v max %d: passes %v cost %d, the best split costs %d", lens, maxTokens, ends, got, want)
		}
	}
}

func TestPlanPassesSplitsMixedLengths(t *testing.T) {
	// One long row and many short ones: padding the short ones to the long
	// one would compute 16 × 400 positions; two passes compute 400 + 15 × 40.
	lens := []int{400}
	for range 15 {
		lens = append(lens, 40)
	}
	if ends := planPasses(lens, MaxPassTokens, MaxPassRows); len(ends) != 2 || ends[0] != 1 {
		t.Errorf("passes %v, want [1 16]", ends)
	}
	// Rows of equal length share one pass.
	if ends := planPasses([]int{50, 50, 50, 50}, MaxPassTokens, MaxPassRows); len(ends) != 1 {
		t.Errorf("equal rows split into passes %v", ends)
	}
}
