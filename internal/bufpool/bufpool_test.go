package bufpool

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLeastRecentlyUsedFirst checks which buffers a pool drops, step by
// step.
func TestLeastRecentlyUsedFirst(t *testing.T) {
	var released []string
	p := New(100, func(b string) { released = append(released, b) })
	p.Put(40, "a")
	p.Put(30, "b")
	p.Put(30, "c") // 100: at the limit, nothing dropped
	if len(released) != 0 {
		t.Fatalf("dropped %v at the limit", released)
	}
	if b, ok := p.Get(40); !ok || b != "a" {
		t.Fatalf("Get(40) = %q, %v", b, ok)
	}
	p.Put(40, "a") // a is now the most recent
	p.Put(20, "d") // 120: b, the least recent, goes
	if !slices.Equal(released, []string{"b"}) {
		t.Fatalf("released %v, want [b]", released)
	}
	p.Put(200, "huge") // larger than the limit alone: dropped at once
	if !slices.Equal(released, []string{"b", "huge"}) {
		t.Fatalf("released %v, want [b huge]", released)
	}
	if b, ok := p.Get(30); !ok || b != "c" {
		t.Fatalf("Get(30) = %q, %v, want c", b, ok)
	}
	if _, ok := p.Get(30); ok {
		t.Fatal("a second Get(30) found a buffer")
	}
	if st := p.Stats(); st.Held != 60 || st.Buffers != 2 || st.Hits != 2 || st.Misses != 1 || st.Drops != 2 {
		t.Errorf("stats %+v, want 60 bytes in 2 buffers, 2 hits, 1 miss, 2 drops", st)
	}
	p.SetLimit(50) // a (40, older) goes, d (20) stays
	if !slices.Equal(released, []string{"b", "huge", "a"}) || p.Stats().Held != 20 {
		t.Errorf("after SetLimit(50): released %v, held %d", released, p.Stats().Held)
	}
	p.Clear()
	if !slices.Equal(released, []string{"b", "huge", "a", "d"}) || p.Stats().Held != 0 {
		t.Errorf("after Clear: released %v, held %d", released, p.Stats().Held)
	}
}

// TestRandomUse drives a pool with random sizes against a plain model of
// it (a list in recency order) and checks after every step that it holds
// what the model holds, within its limit, and released the rest.
func TestRandomUse(t *testing.T) {
	type buf struct {
		id   int
		size int64
	}
	const limit = 1000
	live := map[int]bool{} // ids kept by the pool or handed out
	p := New(limit, func(b buf) {
		if !live[b.id] {
			t.Fatalf("released buffer %d twice", b.id)
		}
		delete(live, b.id)
	})
	var model []buf // kept buffers, least recent first
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	for step := range 20000 {
		size := int64(1 + rng.IntN(12)*rng.IntN(40))
		if rng.IntN(2) == 0 {
			got, ok := p.Get(size)
			i := -1
			for k := len(model) - 1; k >= 0; k-- {
				if model[k].size == size {
					i = k
					break
				}
			}
			if ok != (i >= 0) || ok && got != model[i] {
				t.Fatalf("step %d: Get(%d) = %v, %v; the model has %v", step, size, got, ok, model)
			}
			if ok {
				model = append(model[:i], model[i+1:]...)
				delete(live, got.id)
			}
			continue
		}
		b := buf{next, size}
		next++
		live[b.id] = true
		p.Put(size, b)
		model = append(model, b)
		var held int64
		for _, m := range model {
			held += m.size
		}
		for held > limit {
			held -= model[0].size
			model = model[1:]
		}
		st := p.Stats()
		if st.Held != held || st.Buffers != len(model) || st.Held > limit {
			t.Fatalf("step %d: pool holds %d bytes in %d buffers, the model %d in %d (limit %d)", step, st.Held, st.Buffers, held, len(model), limit)
		}
		if len(live) != len(model) {
			t.Fatalf("step %d: %d buffers not released, the pool keeps %d", step, len(live), len(model))
		}
	}
}

// TestNoAllocations holds Get and Put to no allocation once the pool has
// seen the sizes: a backend takes every tile's scratch from its pool.
func TestNoAllocations(t *testing.T) {
	p := New[[]float32](1<<20, nil)
	bufs := [][]float32{make([]float32, 100), make([]float32, 300)}
	for _, b := range bufs {
		p.Put(int64(4*len(b)), b)
	}
	got := testing.AllocsPerRun(100, func() {
		a, _ := p.Get(400)
		b, _ := p.Get(1200)
		p.Put(400, a)
		p.Put(1200, b)
	})
	if got != 0 {
		t.Errorf("Get and Put allocate %v times a round", got)
	}
}
