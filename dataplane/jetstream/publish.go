package jetstream

import (
	"encoding/json"
	"strconv"
	"sync"
	"unsafe"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// capture returns the stream's internal subscription handler: it copies
// the published message into a proposal and hands it to the apply path.
// It runs on the publisher's goroutine, so it only copies and queues, and
// never waits: past the stall threshold of the stream's or the node's
// backlog (flowGate) it returns a channel for the publishing client to
// wait on before it reads more (or for the route it came over to pause
// its peer's publishers: routed); past the bound it refuses the publish.
func (s *stream) capture(a *jsAccount) func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{} {
	return func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{} {
		if isFastBatchReply(reply) {
			return s.captureFast(a, subject, reply, hdr, msg, routed)
		}
		if id := headerValue(hdr, api.HeaderBatchID); len(id) > 0 {
			return s.captureAtomic(a, string(id), subject, reply, hdr, msg, routed)
		}
		size := len(subject) + len(reply) + len(hdr) + len(msg)
		wait, ok := s.e.flow.admit(s, int64(size), routed)
		if !ok {
			s.refuseBusy(a, subject, reply)
			return nil
		}
		p := &proposal{s: s, kind: propMsg, acct: a, held: int64(size)}
		p.copyIn(subject, reply, hdr, msg)
		p.done = capturedDone
		if !s.ap.submit(p) {
			capturedDone(p, s.ap.closedResult())
			return nil
		}
		return wait
	}
}

// copyIn copies a captured publish into p: one allocation holds every
// byte the proposal carries, its strings and slices view it without
// copying, and it is never written again.
func (p *proposal) copyIn(subject, reply, hdr, msg []byte) {
	buf := make([]byte, 0, len(subject)+len(reply)+len(hdr)+len(msg))
	buf = append(append(append(append(buf, subject...), reply...), hdr...), msg...)
	n := len(subject)
	p.subject = unsafe.String(unsafe.SliceData(buf), n)
	if len(reply) > 0 {
		p.reply = unsafe.String(&buf[n], len(reply))
	}
	n += len(reply)
	if len(hdr) > 0 {
		p.hdr = buf[n : n+len(hdr) : n+len(hdr)]
	}
	p.data = buf[n+len(hdr):]
}

// capturedDone completes a captured message: its room in the backlog is
// given back, then its publisher is answered.
func capturedDone(p *proposal, r result) {
	p.s.e.flow.release(p.s, p.held)
	ackPublish(p, r)
}

// tooManyRequestsHdr is the status header nats-server puts on the 429
// refusal of a publish its stream's ingest queue has no room for.
const tooManyRequestsHdr = "NATS/1.0 429 Too Many Requests\r\n\r\n"

// refuseBusy answers a publish the backlog had no room for as
// nats-server does: a 429 status with the PubAck error 10167 naming the
// stream, whether or not the stream acknowledges publishes. Without a
// reply subject the message is just dropped; a warning says so, at most
// once a second for the node.
func (s *stream) refuseBusy(a *jsAccount, subject, reply []byte) {
	name := s.config().Name
	if s.e.flow.warnNow() {
		s.e.log.Warn("dropping publishes: the stream's ingest backlog is full",
			"account", a.acc.Name(), "stream", name, "subject", string(subject))
	}
	if len(reply) == 0 {
		return
	}
	b, _ := json.Marshal(api.PubAckResponse{Error: api.NewTooManyRequestsError(), PubAck: &api.PubAck{Stream: name}})
	a.acc.Publish(string(reply), "", []byte(tooManyRequestsHdr), b)
}

// ackPublish answers a publish once its outcome is durable: a PubAck, or
// the error, on the publisher's reply subject.
func ackPublish(p *proposal, r result) {
	s := p.s
	if r.err == nil && !r.dup {
		s.republish(p, r.seq)
	}
	if p.reply == "" || isFateUnknown(r.err) {
		return
	}
	if isNotAppended(r.err) {
		// Not stored and never will be: the publisher retries as if no
		// stream had been there, and reaches the partition's new leader.
		p.acct.acc.Publish(p.reply, "", noResponders, nil)
		return
	}
	s.mu.Lock()
	cfg := s.mu.cfg
	s.mu.Unlock()
	if cfg.NoAck {
		return
	}
	if r.err != nil {
		// nats-server names the stream in a refusal too: {"error":…,"stream":…,"seq":0}.
		b, _ := json.Marshal(api.PubAckResponse{Error: api.Prefer(r.err, api.NewStreamStoreFailedError(r.err)),
			PubAck: &api.PubAck{Stream: cfg.Name}})
		p.acct.acc.Publish(p.reply, "", nil, b)
		return
	}
	bp := ackBufs.Get().(*[]byte)
	b := appendPubAck((*bp)[:0], cfg.Name, r.seq, r.dup, s.e.opts.Domain)
	if r.val != "" {
		b = appendCounterVal(b, r.val)
	}
	p.acct.acc.Publish(p.reply, "", nil, b)
	if cap(b) <= maxAckBuf {
		*bp = b[:0]
		ackBufs.Put(bp)
	}
}

// ackBufs holds the buffers PubAcks are written into, one per
// acknowledgement otherwise: Publish copies what it delivers, so a buffer
// is free again once it returns.
var ackBufs = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// maxAckBuf is the most room a pooled PubAck buffer keeps (a long
// stream name, domain or counter total grows it).
const maxAckBuf = 1 << 10

// appendPubAck writes {"stream":…,"seq":…} by hand: it is on the hot path.
func appendPubAck(b []byte, stream string, seq uint64, dup bool, domain string) []byte {
	b = append(b, `{"stream":`...)
	b = strconv.AppendQuote(b, stream)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if domain != "" {
		b = append(b, `,"domain":`...)
		b = strconv.AppendQuote(b, domain)
	}
	if dup {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}
