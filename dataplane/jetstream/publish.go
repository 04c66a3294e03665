package jetstream

import (
	"encoding/json"
	"strconv"
	"unsafe"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// capture returns the stream's internal subscription handler: it copies
// the published message into a proposal and hands it to the apply path.
// It runs on the publisher's goroutine, so it only copies and queues.
func (s *stream) capture(a *jsAccount) func(subject, reply, hdr, msg []byte) {
	return func(subject, reply, hdr, msg []byte) {
		// One allocation holds every byte the proposal carries; the
		// strings view it without copying and it is never written again.
		buf := make([]byte, 0, len(subject)+len(reply)+len(hdr)+len(msg))
		buf = append(append(append(append(buf, subject...), reply...), hdr...), msg...)
		p := &proposal{s: s, kind: propMsg, acct: a}
		n := len(subject)
		p.subject = unsafe.String(unsafe.SliceData(buf), n)
		if len(reply) > 0 {
			p.reply = unsafe.String(&buf[n], len(reply))
		}
		n += len(reply)
		if len(hdr) > 0 {
			p.hdr = buf[n : n+len(hdr) : n+len(hdr)]
		}
		n += len(hdr)
		p.data = buf[n:]
		p.done = ackPublish
		if !s.ap.submit(p) {
			ackPublish(p, result{err: api.NewNotEnabledError()})
		}
	}
}

// ackPublish answers a publish once its outcome is durable: a PubAck, or
// the error, on the publisher's reply subject.
func ackPublish(p *proposal, r result) {
	s := p.s
	if r.err == nil && !r.dup {
		s.republish(p, r.seq)
	}
	if p.reply == "" {
		return
	}
	s.mu.Lock()
	cfg := s.mu.cfg
	s.mu.Unlock()
	if cfg.NoAck {
		return
	}
	var b []byte
	if r.err != nil {
		// nats-server names the stream in a refusal too: {"error":…,"stream":…,"seq":0}.
		b, _ = json.Marshal(api.PubAckResponse{Error: api.Prefer(r.err, api.NewStreamStoreFailedError(r.err)),
			PubAck: &api.PubAck{Stream: cfg.Name}})
	} else {
		b = appendPubAck(make([]byte, 0, 64+len(cfg.Name)), cfg.Name, r.seq, r.dup, s.e.opts.Domain)
	}
	p.acct.acc.Publish(p.reply, "", nil, b)
}

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
