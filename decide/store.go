package decide

import (
	"container/list"
	"sync"

	"github.com/startlux/startlux/model"
)

// snapshot is the model state after a token prefix. Snapshots in the store
// are shared; refs counts the requests using one, and a snapshot that is
// not (or no longer) kept is freed when its last user lets go.
type snapshot struct {
	ids   []int32
	state *model.State
	bytes int64

	// Guarded by the store's mu.
	refs int
	kept bool
	elem *list.Element
}

// snapshotStore keeps evidence prefix snapshots up to a byte limit, least
// recently used out. Snapshots in use are never evicted.
type snapshotStore struct {
	mu    sync.Mutex // guards everything below and the snapshots' refs, kept, elem
	limit int64      // < 0: keep nothing
	used  int64
	lru   *list.List // of *snapshot, most recently used at the front
}

func newSnapshotStore(limit int64) *snapshotStore {
	return &snapshotStore{limit: limit, lru: list.New()}
}

// isPrefix reports whether p is a prefix of s.
func isPrefix(p, s []int32) bool {
	if len(p) > len(s) {
		return false
	}
	for i := len(p) - 1; i >= 0; i-- { // the ends differ first, usually
		if p[i] != s[i] {
			return false
		}
	}
	return true
}

// lookup returns the longest kept snapshot that is a prefix of seq and at
// most maxLen long, with a reference the caller must release, or nil.
func (s *snapshotStore) lookup(seq []int32, maxLen int) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *snapshot
	for e := s.lru.Front(); e != nil; e = e.Next() {
		sn := e.Value.(*snapshot)
		if len(sn.ids) > maxLen || best != nil && len(sn.ids) <= len(best.ids) {
			continue
		}
		if isPrefix(sn.ids, seq) {
			best = sn
		}
	}
	if best != nil {
		best.refs++
		s.lru.MoveToFront(best.elem)
	}
	return best
}

// newLocal wraps a state made for one request; the caller holds the one
// reference.
func newLocal(ids []int32, st *model.State) *snapshot {
	return &snapshot{ids: ids, state: st, bytes: st.Bytes(), refs: 1}
}

// keep offers a request's snapshot (which the caller still references) to
// the store, evicting least recently used unused snapshots to make room. It
// reports whether the snapshot is now kept.
func (s *snapshotStore) keep(sn *snapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit < 0 || sn.bytes > s.limit || sn.kept {
		return sn.kept
	}
	for e := s.lru.Front(); e != nil; e = e.Next() {
		if o := e.Value.(*snapshot); len(o.ids) == len(sn.ids) && isPrefix(o.ids, sn.ids) {
			return false // an equal one is already kept
		}
	}
	for e := s.lru.Back(); e != nil && s.used+sn.bytes > s.limit; {
		prev := e.Prev()
		if o := e.Value.(*snapshot); o.refs == 0 {
			s.dropLocked(o)
		}
		e = prev
	}
	if s.used+sn.bytes > s.limit {
		return false
	}
	sn.kept = true
	sn.elem = s.lru.PushFront(sn)
	s.used += sn.bytes
	return true
}

// dropLocked takes sn out of the store, freeing it if nobody uses it.
func (s *snapshotStore) dropLocked(sn *snapshot) {
	s.lru.Remove(sn.elem)
	sn.elem, sn.kept = nil, false
	s.used -= sn.bytes
	if sn.refs == 0 {
		sn.state.Free()
	}
}

// release drops a reference taken by lookup or newLocal.
func (s *snapshotStore) release(sn *snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn.refs--
	if sn.refs == 0 && !sn.kept {
		sn.state.Free()
	}
}

// clear drops every snapshot; those in use are freed when released.
func (s *snapshotStore) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.lru.Front(); e != nil; {
		next := e.Next()
		s.dropLocked(e.Value.(*snapshot))
		e = next
	}
}

// stats returns the bytes kept and the limit.
func (s *snapshotStore) stats() (used, limit int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.limit
}
