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
// Invariant: pending == the bytes in q plus those taken and not yet written.
type outbound struct {
	mu struct {
		sync.Mutex
		q       outChunks // guarded by mu
		pending int64     // bytes queued or being written; guarded by mu
		queued  bool      // a producer has promised to signal the flusher; guarded by mu
		stop    bool      // no more appends; guarded by mu
		writing bool      // a goroutine is writing taken chunks; guarded by mu
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

// appendLocked queues b.
func (o *outbound) appendLocked(b []byte) {
	o.mu.q.add(b)
	o.mu.pending += int64(len(b))
}

// takeLocked hands every queued chunk to the flusher.
func (o *outbound) takeLocked(dst net.Buffers) net.Buffers {
	dst, _ = o.mu.q.take(dst, -1)
	o.mu.queued = false
	return dst
}

// outChunks is a queue of pooled chunks, filled at the back: a client's
// outbound queue, and each account's share of a route's.
type outChunks struct {
	full [][]byte // filled chunks, oldest first
	cur  []byte   // the chunk being filled
}

// room makes cur able to take n more bytes. A message never spans two
// chunks, so whole chunks can be taken without splitting one.
func (c *outChunks) room(n int) {
	if cap(c.cur)-len(c.cur) >= n {
		return
	}
	if len(c.cur) > 0 {
		c.full = append(c.full, c.cur)
	}
	if n <= chunkSize {
		c.cur = (*chunkPool.Get().(*[]byte))[:0]
	} else {
		c.cur = make([]byte, 0, n)
	}
}

// add queues b.
func (c *outChunks) add(b []byte) {
	c.room(len(b))
	c.cur = append(c.cur, b...)
}

// empty reports whether nothing is queued.
func (c *outChunks) empty() bool { return len(c.full) == 0 && len(c.cur) == 0 }

// take moves chunks to dst, oldest first, until at least max bytes are
// taken or none is left (max < 0: all), and reports the bytes taken.
// Drained, full keeps its backing array for the next chunks.
func (c *outChunks) take(dst net.Buffers, max int) (net.Buffers, int) {
	n, i := 0, 0
	for ; i < len(c.full) && (max < 0 || n < max); i++ {
		dst = append(dst, c.full[i])
		n += len(c.full[i])
	}
	if i < len(c.full) {
		clear(c.full[:i])
		c.full = c.full[i:]
		return dst, n
	}
	clear(c.full)
	c.full = c.full[:0]
	if len(c.cur) > 0 && (max < 0 || n < max) {
		dst = append(dst, c.cur)
		n += len(c.cur)
		c.cur = nil
	}
	return dst, n
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
