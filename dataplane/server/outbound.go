package server

import (
	"net"
	"sync"
)

// chunkSize is the size of the pooled buffers outbound data is copied into.
// Many small messages share a chunk, so one vectored write carries many.
const chunkSize = 32 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize); return &b }}

// outbound is a connection's queue of bytes waiting to be written. Any
// goroutine may append; one writer at a time (the flusher, or the read loop
// in place) takes and writes, which the writing flag arbitrates.
//
// Invariant: pending == total length of full and cur.
type outbound struct {
	mu struct {
		sync.Mutex
		full    [][]byte // filled chunks, oldest first; guarded by mu
		cur     []byte   // chunk being filled; guarded by mu
		pending int64    // guarded by mu
		queued  bool     // a producer has promised to signal the flusher; guarded by mu
		stop    bool     // no more appends; guarded by mu
		writing bool     // a goroutine is writing taken chunks; guarded by mu
		// stall is closed when a backlog past the stall threshold drains;
		// producers wait on it briefly so a fast publisher slows to its
		// subscriber's pace instead of overrunning it. Guarded by mu.
		stall chan struct{}
	}
	signal chan struct{} // wakes the flusher; capacity 1
}

func newOutbound() *outbound {
	return &outbound{signal: make(chan struct{}, 1)}
}

// wake makes the flusher run soon; it never blocks.
func (o *outbound) wake() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// roomLocked makes cur able to take n more bytes.
func (o *outbound) roomLocked(n int) {
	if cap(o.mu.cur)-len(o.mu.cur) >= n {
		return
	}
	if len(o.mu.cur) > 0 {
		o.mu.full = append(o.mu.full, o.mu.cur)
	}
	if n <= chunkSize {
		o.mu.cur = (*chunkPool.Get().(*[]byte))[:0]
	} else {
		o.mu.cur = make([]byte, 0, n)
	}
}

// appendLocked queues b.
func (o *outbound) appendLocked(b []byte) {
	o.roomLocked(len(b))
	o.mu.cur = append(o.mu.cur, b...)
	o.mu.pending += int64(len(b))
}

// takeLocked hands every queued chunk to the flusher.
func (o *outbound) takeLocked(dst net.Buffers) net.Buffers {
	dst = append(dst, o.mu.full...)
	clear(o.mu.full)
	o.mu.full = o.mu.full[:0]
	if len(o.mu.cur) > 0 {
		dst = append(dst, o.mu.cur)
		o.mu.cur = nil
	}
	o.mu.queued = false
	return dst
}

// stallLocked returns the channel a producer may wait on when the backlog
// is past three quarters of max, creating it if needed; nil otherwise.
func (o *outbound) stallLocked(max int64) chan struct{} {
	if o.mu.pending <= max/4*3 {
		return nil
	}
	if o.mu.stall == nil {
		o.mu.stall = make(chan struct{})
	}
	return o.mu.stall
}

// unstallLocked releases waiting producers once the backlog is below the
// stall threshold again (or the connection is stopping).
func (o *outbound) unstallLocked(max int64) {
	if o.mu.stall != nil && (o.mu.pending <= max/4*3 || o.mu.stop) {
		close(o.mu.stall)
		o.mu.stall = nil
	}
}

// release returns written chunks to the pool.
func release(bufs [][]byte) {
	for i, b := range bufs {
		if cap(b) == chunkSize {
			b = b[:0]
			chunkPool.Put(&b)
		}
		bufs[i] = nil
	}
}
