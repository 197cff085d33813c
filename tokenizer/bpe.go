package tokenizer

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// mergeTable maps a pair of token ids to the merge's rank and the merged
// token's id: an open-addressing hash table with linear probing, several
// times faster than a Go map on this hot path.
type mergeTable struct {
	slots []mergeSlot
	shift uint
	n     int
}

type mergeSlot struct {
	key  uint64 // a<<32 | b, or emptyKey
	rank uint32
	id   int32
}

const emptyKey = ^uint64(0)

// noRank is larger than every rank.
const noRank = ^uint32(0)

func newMergeTable(n int) mergeTable {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	t := mergeTable{slots: make([]mergeSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
	for i := range t.slots {
		t.slots[i].key = emptyKey
	}
	return t
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (t *mergeTable) slot(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// put sets the merge of (a, b); a later put of the same pair replaces the
// earlier one, as a later merges entry does in Hugging Face's BPE.
func (t *mergeTable) put(a, b int32, rank uint32, id int32) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	key := pairKey(a, b)
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			s.rank, s.id = rank, id
			return
		}
		if s.key == emptyKey {
			*s = mergeSlot{key: key, rank: rank, id: id}
			t.n++
			return
		}
	}
}

// grow doubles the table.
func (t *mergeTable) grow() {
	old := t.slots
	*t = newMergeTable(len(old))
	for _, s := range old {
		if s.key != emptyKey {
			t.put(int32(s.key>>32), int32(uint32(s.key)), s.rank, s.id)
		}
	}
}

// get returns the rank and result of merging (a, b), or noRank.
func (t *mergeTable) get(a, b int32) (uint32, int32) {
	key := pairKey(a, b)
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.rank, s.id
		}
		if s.key == emptyKey {
			return noRank, -1
		}
	}
}

// bpeModel is a byte-level BPE model working on raw bytes: the vocabulary's
// byte-level characters were mapped back to the bytes they stand for at load
// time, so a pre-token's bytes are its initial symbols.
type bpeModel struct {
	merges mergeTable
	// byteID is the token of each single byte; allBytes says every byte has
	// one (true for any usable byte-level vocabulary).
	byteID   [256]int32
	allBytes bool
	// For vocabularies missing some byte: what that byte becomes (byte
	// fallback tokens), else the unknown token (-1: dropped).
	byteSyms [256][]int32
	unkID    int32
	fuseUnk  bool
	// ignoreMerges: a word that is itself a token is that token.
	ignoreMerges bool
	byteVocab    map[string]int32

	// maxTokenBytes is the most bytes one token covers (0: unbounded).
	maxTokenBytes int

	cache   wordCache
	long    longCache
	scratch sync.Pool // *largeScratch
}

// maxCachedWord is the longest pre-token (in bytes) kept in the cache.
const maxCachedWord = 256

// smallWord is the longest word merged by the quadratic in-place method;
// longer words use a priority queue.
const smallWord = 48

// appendWord appends the tokens of one pre-token.
func (m *bpeModel) appendWord(dst []int32, w string) []int32 {
	if len(w) == 1 && m.allBytes {
		return append(dst, m.byteID[w[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.byteVocab[w]; ok {
			return append(dst, id)
		}
	}
	cacheable := len(w) <= maxCachedWord
	if cacheable {
		if ids, ok := m.cache.get(w); ok {
			return append(dst, ids...)
		}
	} else if ids, ok := m.long.get(w); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	if len(w) <= smallWord && m.allBytes {
		var buf [smallWord]int32
		syms := buf[:len(w)]
		for i := 0; i < len(w); i++ {
			syms[i] = m.byteID[w[i]]
		}
		dst = append(dst, m.mergeSmall(syms)...)
	} else {
		dst = m.mergeLarge(dst, m.initial(w))
	}
	if cacheable {
		m.cache.put(w, dst[start:])
	} else if len(w) <= MaxWordBytes {
		m.long.put(w, dst[start:])
	}
	return dst
}

// initial returns the starting symbols of w, as Hugging Face's
// BPE::merge_word builds them: each byte's token, else its byte-fallback
// tokens, else the unknown token (consecutive ones fused if fuseUnk), else
// nothing.
func (m *bpeModel) initial(w string) []int32 {
	syms := make([]int32, 0, len(w))
	if m.allBytes {
		for i := 0; i < len(w); i++ {
			syms = append(syms, m.byteID[w[i]])
		}
		return syms
	}
	pendingUnk := false
	for i := 0; i < len(w); i++ {
		b := w[i]
		if m.byteID[b] >= 0 {
			if pendingUnk {
				syms = append(syms, m.unkID)
				pendingUnk = false
			}
			syms = append(syms, m.byteID[b])
			continue
		}
		if fb := m.byteSyms[b]; fb != nil {
			// Hugging Face does not flush a pending unknown here; the fallback
			// tokens go in first.
			syms = append(syms, fb...)
			continue
		}
		if m.unkID >= 0 {
			if pendingUnk && !m.fuseUnk {
				syms = append(syms, m.unkID)
			}
			pendingUnk = true
		}
	}
	if pendingUnk {
		syms = append(syms, m.unkID)
	}
	return syms
}

// mergeSmall applies the merges to syms in place and returns the result:
// each step merges the lowest-ranked adjacent pair, leftmost first.
func (m *bpeModel) mergeSmall(syms []int32) []int32 {
	n := len(syms)
	if n < 2 {
		return syms
	}
	var rankBuf [smallWord]uint32
	var idBuf [smallWord]int32
	ranks, ids := rankBuf[:n-1], idBuf[:n-1]
	for i := 0; i < n-1; i++ {
		ranks[i], ids[i] = m.merges.get(syms[i], syms[i+1])
	}
	for n > 1 {
		best, bi := noRank, -1
		for i, r := range ranks[:n-1] {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = ids[bi]
		copy(syms[bi+1:n-1], syms[bi+2:n])
		copy(ranks[bi:n-2], ranks[bi+1:n-1])
		copy(ids[bi:n-2], ids[bi+1:n-1])
		n--
		if bi > 0 {
			ranks[bi-1], ids[bi-1] = m.merges.get(syms[bi-1], syms[bi])
		}
		if bi < n-1 {
			ranks[bi], ids[bi] = m.merges.get(syms[bi], syms[bi+1])
		}
	}
	return syms[:n]
}

// heapItem is a candidate merge at symbol position pos.
type heapItem struct {
	rank uint32
	pos  int32
	id   int32
}

func (a heapItem) less(b heapItem) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

type mergeHeap []heapItem

func (h *mergeHeap) push(it heapItem) {
	*h = append(*h, it)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() heapItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		c := l
		if r := l + 1; r < len(s) && s[r].less(s[l]) {
			c = r
		}
		if !s[c].less(s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// linkSym is a symbol of the linked-list merge; removed symbols have dead set.
type linkSym struct {
	id         int32
	prev, next int32
	dead       bool
}

type largeScratch struct {
	syms []linkSym
	heap mergeHeap
}

// mergeLarge applies the merges to syms with a priority queue over a linked
// list (Hugging Face's Word::merge_all, step for step) and appends the result
// to dst.
func (m *bpeModel) mergeLarge(dst []int32, init []int32) []int32 {
	sc, _ := m.scratch.Get().(*largeScratch)
	if sc == nil {
		sc = new(largeScratch)
	}
	defer m.scratch.Put(sc)
	syms := sc.syms[:0]
	for i, id := range init {
		syms = append(syms, linkSym{id: id, prev: int32(i - 1), next: int32(i + 1)})
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if r, id := m.merges.get(syms[i].id, syms[i+1].id); r != noRank {
			h.push(heapItem{rank: r, pos: int32(i), id: id})
		}
	}
	for len(h) > 0 {
		top := h.pop()
		cur := &syms[top.pos]
		if cur.dead || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		// Skip entries made stale by an earlier merge.
		if _, id := m.merges.get(cur.id, right.id); id != top.id {
			continue
		}
		cur.id = top.id
		cur.next = right.next
		syms[nextPos].dead = true
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if r, id := m.merges.get(syms[cur.prev].id, cur.id); r != noRank {
				h.push(heapItem{rank: r, pos: cur.prev, id: id})
			}
		}
		if cur.next >= 0 {
			if r, id := m.merges.get(cur.id, syms[cur.next].id); r != noRank {
				h.push(heapItem{rank: r, pos: top.pos, id: id})
			}
		}
	}
	for i := range syms {
		if !syms[i].dead {
			dst = append(dst, syms[i].id)
		}
	}
	sc.syms, sc.heap = syms, h
	return dst
}

// wordCache remembers the tokens of recent pre-tokens: a direct-mapped
// table of immutable entries behind atomic pointers, so lookups take no lock
// and concurrent encoders never wait on one another. A new word replaces
// whatever shared its slot.
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

const cacheSlots = 1 << 16

type cacheEntry struct {
	word string
	ids  []int32
}

func newWordCache() wordCache {
	return wordCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

func (c *wordCache) slot(w string) *atomic.Pointer[cacheEntry] {
	return &c.slots[maphash.String(c.seed, w)&(cacheSlots-1)]
}

func (c *wordCache) get(w string) ([]int32, bool) {
	if e := c.slot(w).Load(); e != nil && e.word == w {
		return e.ids, true
	}
	return nil, false
}

func (c *wordCache) put(w string, ids []int32) {
	c.slot(w).Store(&cacheEntry{word: strings.Clone(w), ids: slices.Clone(ids)})
}

// longCache remembers the tokens of the last few words too long for the
// word cache (up to MaxWordBytes), so that a text that repeats one (the same evidence rendered
// in every row of a request) merges it once: a small ring of immutable
// entries behind atomic pointers.
type longCache struct {
	slots [4]atomic.Pointer[cacheEntry]
	next  atomic.Uint32
}

func (c *longCache) get(w string) ([]int32, bool) {
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil && len(e.word) == len(w) && e.word == w {
			return e.ids, true
		}
	}
	return nil, false
}

func (c *longCache) put(w string, ids []int32) {
	i := c.next.Add(1) % uint32(len(c.slots))
	c.slots[i].Store(&cacheEntry{word: strings.Clone(w), ids: slices.Clone(ids)})
}
