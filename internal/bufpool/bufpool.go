// Package bufpool keeps freed buffers for reuse up to a bound in bytes, the
// least recently used dropped first: the compute backends' pools of
// activation and scratch memory, bounded the way MLX bounds its buffer cache
// (without a bound such a pool grows with every new request shape).
package bufpool

import "sync"

// DefaultLimit is the bound of a backend's pool unless it is told another
// (1 GiB, MLX's default cache limit on a Mac).
const DefaultLimit = 1 << 30

// Pool keeps buffers of type B, each filed under its size in bytes, holding
// at most its limit in all: a Put that passes it drops the least recently
// put buffers, handing each to the release function. Its methods are safe
// for concurrent use, and once the pool has seen its sizes neither Get nor
// Put allocates (a backend takes its per-tile scratch from it).
type Pool[B any] struct {
	release func(B) // read-only after New

	mu     sync.Mutex // guards the fields below
	limit  int64
	held   int64
	bySize map[int64][]*node[B] // the kept buffers of each size, least recent first
	head   node[B]              // sentinel of the recency list: head.next the most recent
	n      int                  // buffers kept
	spare  *node[B]             // nodes to reuse, linked through next
	hits   uint64
	misses uint64
	drops  uint64
}

// node is one kept buffer in the recency list.
type node[B any] struct {
	prev, next *node[B]
	size       int64
	buf        B
}

// maxIdleSizes bounds the sizes remembered with no buffer kept, whose
// slices are kept so that a size seen again does not allocate.
const maxIdleSizes = 1024

// New returns a pool bounded to limit bytes (≤ 0: nothing is kept), which
// hands each buffer it drops to release (nil: the buffer is just forgotten,
// left to the garbage collector).
func New[B any](limit int64, release func(B)) *Pool[B] {
	p := &Pool[B]{release: release, limit: max(limit, 0), bySize: map[int64][]*node[B]{}}
	p.head.prev, p.head.next = &p.head, &p.head
	return p
}

// Get takes a kept buffer of exactly size bytes, the most recently put one,
// and reports whether there was one.
func (p *Pool[B]) Get(size int64) (B, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.bySize[size]
	if len(l) == 0 {
		p.misses++
		var zero B
		return zero, false
	}
	nd := l[len(l)-1]
	l[len(l)-1] = nil
	p.bySize[size] = l[:len(l)-1]
	buf := nd.buf
	p.unlinkLocked(nd)
	p.hits++
	return buf, true
}

// Put keeps buf, of size bytes, for a later Get, then drops the least
// recently put buffers until the pool holds no more than its limit (buf
// itself when it alone is larger).
func (p *Pool[B]) Put(size int64, buf B) {
	p.mu.Lock()
	if size > p.limit {
		p.drops++
		p.mu.Unlock()
		if p.release != nil {
			p.release(buf)
		}
		return
	}
	nd := p.spare
	if nd != nil {
		p.spare = nd.next
	} else {
		nd = new(node[B])
	}
	nd.size, nd.buf = size, buf
	nd.prev, nd.next = &p.head, p.head.next
	p.head.next.prev = nd
	p.head.next = nd
	if _, ok := p.bySize[size]; !ok && len(p.bySize) >= maxIdleSizes {
		p.forgetIdleLocked()
	}
	p.bySize[size] = append(p.bySize[size], nd)
	p.held += size
	p.n++
	dropped := p.trimLocked(p.limit)
	p.mu.Unlock()
	p.drop(dropped)
}

// unlinkLocked takes nd out of the recency list and the counts and keeps
// the node for reuse.
func (p *Pool[B]) unlinkLocked(nd *node[B]) {
	nd.prev.next, nd.next.prev = nd.next, nd.prev
	p.held -= nd.size
	p.n--
	var zero B
	nd.buf, nd.prev = zero, nil
	nd.next, p.spare = p.spare, nd
}

// forgetIdleLocked drops the sizes that have no buffer kept.
func (p *Pool[B]) forgetIdleLocked() {
	for size, l := range p.bySize {
		if len(l) == 0 {
			delete(p.bySize, size)
		}
	}
}

// trimLocked removes the least recently put buffers until at most limit
// bytes are held and returns them.
func (p *Pool[B]) trimLocked(limit int64) []B {
	var out []B
	for p.held > limit {
		nd := p.head.prev // the least recent, so the first of its size
		l := p.bySize[nd.size]
		copy(l, l[1:])
		l[len(l)-1] = nil
		p.bySize[nd.size] = l[:len(l)-1]
		out = append(out, nd.buf)
		p.unlinkLocked(nd)
		p.drops++
	}
	return out
}

// drop releases buffers that left the pool.
func (p *Pool[B]) drop(bufs []B) {
	if p.release == nil {
		return
	}
	for _, b := range bufs {
		p.release(b)
	}
}

// SetLimit changes the bound (≤ 0: keep nothing), dropping buffers at once
// when the pool holds more.
func (p *Pool[B]) SetLimit(limit int64) {
	p.mu.Lock()
	p.limit = max(limit, 0)
	dropped := p.trimLocked(p.limit)
	p.mu.Unlock()
	p.drop(dropped)
}

// Clear drops every kept buffer.
func (p *Pool[B]) Clear() {
	p.mu.Lock()
	dropped := p.trimLocked(0)
	p.mu.Unlock()
	p.drop(dropped)
}

// Stats is what a pool holds and has done.
type Stats struct {
	// Held is the bytes of the buffers kept now, Limit their bound.
	Held, Limit int64
	// Buffers counts the buffers kept now.
	Buffers int
	// Hits and Misses count the Gets that found a buffer and those that
	// did not; Drops the buffers dropped to stay within the limit.
	Hits, Misses, Drops uint64
}

// Stats returns what the pool holds and has done.
func (p *Pool[B]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Held: p.held, Limit: p.limit, Buffers: p.n, Hits: p.hits, Misses: p.misses, Drops: p.drops}
}
