package jetstream

import (
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for what captured publishes may hold in the apply path. The
// per-stream figures are nats-server's max_buffered_msgs and
// max_buffered_size, but smaller than its defaults (100,000 messages,
// 128 MiB): there, each stream has an ingest queue and goroutine of its
// own, while here every stream of a node shares one apply path and its
// memory, so one stream's backlog is something every tenant pays for.
const (
	DefaultMaxBufferedMsgs     = 10_000
	DefaultMaxBufferedSize     = 16 << 20
	DefaultNodeMaxBufferedMsgs = 100_000
	DefaultNodeMaxBufferedSize = 128 << 20
)

// flowLimits bound the backlog of captured publishes: per stream and for
// the whole node, in messages and in bytes (subject, reply, headers and
// payload, as nats-server counts them).
type flowLimits struct {
	streamMsgs, streamBytes int64
	nodeMsgs, nodeBytes     int64
}

// limitsFrom fills in defaults for the limits opts leaves at zero.
func limitsFrom(opts Options) flowLimits {
	or := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return flowLimits{
		streamMsgs: or(opts.MaxBufferedMsgs, DefaultMaxBufferedMsgs), streamBytes: or(opts.MaxBufferedSize, DefaultMaxBufferedSize),
		nodeMsgs: or(opts.NodeMaxBufferedMsgs, DefaultNodeMaxBufferedMsgs), nodeBytes: or(opts.NodeMaxBufferedSize, DefaultNodeMaxBufferedSize),
	}
}

// backlog is what captured publishes of one stream (or of the node) hold
// in the apply path.
type backlog struct {
	msgs, bytes int64
	// drained is closed once the backlog is back under its stall
	// threshold; nil while nobody waits.
	drained chan struct{}
}

// over reports whether the backlog would pass msgs or bytes with one more
// message of n bytes. An empty backlog takes any one message, so a
// message larger than the byte bound is slow, not impossible.
func (b *backlog) over(n, msgs, bytes int64) bool {
	return b.msgs > 0 && (b.msgs+1 > msgs || b.bytes+n > bytes)
}

// past reports whether the backlog is past three quarters of its bounds,
// where publishers start to wait for it (as a connection's outbound
// queue makes them wait for a slow subscriber).
func (b *backlog) past(msgs, bytes int64) bool {
	return b.msgs > msgs/4*3 || b.bytes > bytes/4*3
}

// wait returns the channel closed when the backlog drains below its stall
// threshold, creating it if needed.
func (b *backlog) wait() <-chan struct{} {
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	return b.drained
}

// releaseIfUnder wakes the waiting publishers once the backlog is back
// under its stall threshold.
func (b *backlog) releaseIfUnder(msgs, bytes int64) {
	if b.drained != nil && !b.past(msgs, bytes) {
		close(b.drained)
		b.drained = nil
	}
}

// flowGate bounds what captured publishes hold in a node's apply path,
// from capture until their outcome was delivered: per stream, so one
// stream's backlog can never fill the node's, and per node, so memory
// stays bounded however many streams are flooded. Past three quarters
// of a bound the publishing client is told to wait (its read loop pauses
// and TCP slows the sender); past the bound a publish is refused with
// nats-server's 429, which is what a server-side publisher (republish, a
// reply) gets too, because it must never wait.
//
// Invariant: the node backlog is the sum of the stream backlogs; a
// stream's entry exists exactly while its backlog is not empty.
type flowGate struct {
	lim flowLimits
	// warned is when a refusal was last logged (unix nanos).
	warned atomic.Int64
	mu     struct {
		sync.Mutex
		node    backlog              // guarded by mu
		streams map[*stream]*backlog // guarded by mu
	}
}

func newFlowGate(lim flowLimits) *flowGate {
	g := &flowGate{lim: lim}
	g.mu.streams = map[*stream]*backlog{}
	return g
}

// admit reserves room for one captured message of n bytes for s. ok false
// means the backlog is full and the publish must be refused. A non-nil
// wait is closed once the backlog that is past its stall threshold has
// drained; a client publisher waits on it before reading more.
//
// A routed publish (one that crossed a route from a peer that pauses its
// publishers when asked) may take the stream's bound once more: its
// publisher's pause takes a round trip to arrive, and what the peer sent
// meanwhile (4 MiB in 10 ms of a loaded node's scheduling, seen with an
// object store's chunks) would otherwise be refused. The node's bound
// still holds.
func (g *flowGate) admit(s *stream, n int64, routed bool) (wait <-chan struct{}, ok bool) {
	l := &g.lim
	streamMsgs, streamBytes := l.streamMsgs, l.streamBytes
	if routed {
		streamMsgs, streamBytes = 2*streamMsgs, 2*streamBytes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.mu.streams[s]
	if b == nil {
		// A stream with nothing queued is always let in: a tenant
		// publishing one message at a time is never refused because
		// others filled the node.
		b = &backlog{}
	} else if b.over(n, streamMsgs, streamBytes) || g.mu.node.over(n, l.nodeMsgs, l.nodeBytes) {
		return nil, false
	}
	if b.msgs == 0 {
		g.mu.streams[s] = b
	}
	b.msgs++
	b.bytes += n
	g.mu.node.msgs++
	g.mu.node.bytes += n
	switch {
	case b.past(l.streamMsgs, l.streamBytes):
		return b.wait(), true
	case g.mu.node.past(l.nodeMsgs, l.nodeBytes) && b.msgs > 1:
		return g.mu.node.wait(), true
	}
	return nil, true
}

// release returns what admit reserved, once the message's outcome is
// known.
func (g *flowGate) release(s *stream, n int64) {
	l := &g.lim
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.mu.streams[s]
	b.msgs--
	b.bytes -= n
	g.mu.node.msgs--
	g.mu.node.bytes -= n
	b.releaseIfUnder(l.streamMsgs, l.streamBytes)
	g.mu.node.releaseIfUnder(l.nodeMsgs, l.nodeBytes)
	if b.msgs == 0 {
		delete(g.mu.streams, s)
	}
}

// buffered reports the backlog of s and of the node (for tests and
// monitoring).
func (g *flowGate) buffered(s *stream) (stream, node backlog) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.mu.streams[s]; b != nil {
		stream = backlog{msgs: b.msgs, bytes: b.bytes}
	}
	return stream, backlog{msgs: g.mu.node.msgs, bytes: g.mu.node.bytes}
}

// warnNow reports whether a refusal should be logged: at most once a
// second, so a flood does not flood the log too.
func (g *flowGate) warnNow() bool {
	now, last := time.Now().UnixNano(), g.warned.Load()
	return now-last >= int64(time.Second) && g.warned.CompareAndSwap(last, now)
}
