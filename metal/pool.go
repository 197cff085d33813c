package metal

import (
	"sync"

	"github.com/startlux/startlux/internal/bufpool"
	"github.com/startlux/startlux/tensor"
)

// newBackend returns the backend over a driver, its pool bounded as opts
// says.
func newBackend(drv driver, opts Options, gpu bool) *Backend {
	limit := opts.PoolLimit
	if limit == 0 {
		limit = bufpool.DefaultLimit
	}
	b := &Backend{drv: drv, timeout: commandTimeout(opts, gpu)}
	b.mem.idle = bufpool.New(limit, drv.free)
	return b
}

// memPool keeps the buffers of freed tensors for reuse, as MLX keeps its
// buffer cache: making a buffer costs the device an allocation and zeroed
// pages, and a forward pass frees and allocates the same sizes layer after
// layer. A buffer freed while queued work may still use it waits in freed
// until the next wait; then it joins idle, which holds at most its limit in
// bytes and releases the least recently freed buffers beyond it.
type memPool struct {
	idle *bufpool.Pool[buffer] // buffers no queued work touches, by size

	// mu guards freed: the backend's calls come one at a time, but
	// PoolStats may be asked from anywhere.
	mu    sync.Mutex
	freed []pooled // freed while work was queued
}

// pooled is a freed buffer and its size in bytes.
type pooled struct {
	size int
	buf  buffer
}

// scrubber is implemented by drivers that mark a buffer's contents as dead
// when it is freed (the emulator fills it with NaNs), so that a use after
// Free shows up even when the buffer is kept for reuse.
type scrubber interface {
	scrub(b buffer)
}

// get takes a kept buffer of size bytes.
func (p *memPool) get(size int) (buffer, bool) { return p.idle.Get(int64(size)) }

// put keeps a freed buffer: at once when no work is queued, else after the
// next wait.
func (p *memPool) put(drv driver, size int, buf buffer) {
	if !drv.idle() {
		p.mu.Lock()
		p.freed = append(p.freed, pooled{size, buf})
		p.mu.Unlock()
		return
	}
	p.keep(drv, size, buf)
}

// keep hands an idle buffer to the pool.
func (p *memPool) keep(drv driver, size int, buf buffer) {
	if s, ok := drv.(scrubber); ok {
		s.scrub(buf)
	}
	p.idle.Put(int64(size), buf)
}

// settle moves the buffers freed while work was queued into the pool once
// none is queued any more (after a wait that finished).
func (p *memPool) settle(drv driver) {
	if !drv.idle() {
		return
	}
	p.mu.Lock()
	freed := p.freed
	p.freed = nil
	p.mu.Unlock()
	for _, f := range freed {
		p.keep(drv, f.size, f.buf)
	}
}

// close releases every kept buffer (the driver waits for queued work
// first, as its own close would).
func (p *memPool) close(drv driver) {
	if !drv.idle() {
		p.mu.Lock()
		for _, f := range p.freed {
			drv.free(f.buf) // released once the queued work is done
		}
		p.freed = nil
		p.mu.Unlock()
	}
	p.settle(drv)
	p.idle.Clear()
}

// PoolStats returns the bytes of freed buffers kept for reuse (those
// waiting for queued work included) and their bound.
func (b *Backend) PoolStats() (held, limit int64) {
	st := b.mem.idle.Stats()
	held = st.Held
	b.mem.mu.Lock()
	for _, f := range b.mem.freed {
		held += int64(f.size)
	}
	b.mem.mu.Unlock()
	return held, st.Limit
}

// SetPoolLimit bounds the bytes of freed buffers kept for reuse (≤ 0:
// none), releasing the least recently freed ones beyond it now and whenever
// a freed one would pass it. The default is bufpool.DefaultLimit (1 GiB).
func (b *Backend) SetPoolLimit(bytes int64) { b.mem.idle.SetLimit(bytes) }

var _ tensor.Pooler = (*Backend)(nil)
