package jetstream

import (
	"bytes"
	"encoding/json"
	mathrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

func sortSeqs(s []uint64) { slices.Sort(s) }

// onAck handles a reply on one of the consumer's ack subjects:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>.
func (c *consumer) onAck(subj, reply, _, msg []byte) {
	if len(subj) < len(c.ackPrefix) || string(subj[:len(c.ackPrefix)]) != c.ackPrefix {
		return
	}
	toks, ok := parseAckToks(subj[len(c.ackPrefix):])
	if !ok {
		return
	}
	sseq, err := strconv.ParseUint(string(toks[1]), 10, 64)
	if err != nil {
		return
	}
	body := bytes.TrimSpace(msg)
	verb, arg, _ := bytes.Cut(body, []byte(" "))
	// One ack acknowledges one sequence, or (ack_policy all) a few: the
	// room for the common case is on the stack.
	var one [1]uint64
	var removable []uint64
	switch string(verb) {
	case "", "+ACK", "+TERM":
		if c.unknownDelivery(sseq) {
			return // unanswered: see unknownDelivery
		}
	}
	switch string(verb) {
	case "", "+ACK":
		removable = c.ack(sseq, one[:0])
	case "-NAK":
		c.nak(sseq, arg)
		c.msgAdvisory("MSG_NAKED", "io.nats.jetstream.advisory.v1.nak", toks, "")
	case "+WPI":
		c.progress(sseq)
	case "+TERM":
		// Terminated is done with, as far as retention goes.
		removable = c.term(sseq)
		c.msgAdvisory("MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated", toks, string(arg))
	case "+NXT":
		if !c.unknownDelivery(sseq) {
			removable = c.ack(sseq, one[:0])
		}
		if len(reply) > 0 {
			c.pull(string(reply), arg)
			reply = nil
		}
	default:
		return
	}
	// A double ack: the client waits to hear the ack was processed.
	var answer func()
	if len(reply) > 0 {
		to := string(reply)
		answer = func() { c.a.acc.Publish(to, "", nil, nil) }
	}
	kept := c.s.keepsConsumer(c.config())
	if len(removable) > 0 {
		var then func()
		if !kept {
			then = answer
		}
		c.s.acked(c.a, removable, then)
		if string(verb) != "+TERM" {
			c.sampleAck(toks)
		}
	}
	switch {
	case answer == nil:
	case kept:
		// Answered once the state holding the ack is durable (and after
		// the retention it caused): an acknowledged double ack survives
		// a crash.
		c.persistThen(answer)
	case len(removable) == 0:
		answer()
	}
	c.wake()
}

// unknownDelivery reports whether sseq is at or past the next stream
// sequence this consumer would deliver: its ack answers a delivery this
// node never made, one an earlier leader of the partition made and never
// wrote (deliveries are written lazily; only acks wait to be durable).
// Such an ack is ignored and left unanswered, as nats-server leaves it:
// acting on it would move the consumer past messages it never delivered,
// and answering it would confirm an ack nothing records, which the client
// would take as final while the message is redelivered. The client's
// double ack times out and it acks again once the message comes back.
func (c *consumer) unknownDelivery(sseq uint64) bool {
	return sseq >= c.sseqA.Load()
}

// ackToks are an ack subject's tokens after the consumer's prefix:
// delivered count, stream sequence, consumer sequence, timestamp,
// pending. They view the subject.
type ackToks [5][]byte

// parseAckToks splits what follows the consumer's ack prefix; false
// unless it is exactly five tokens.
func parseAckToks(rest []byte) (t ackToks, ok bool) {
	for i := range len(t) - 1 {
		j := bytes.IndexByte(rest, '.')
		if j < 0 {
			return t, false
		}
		t[i], rest = rest[:j], rest[j+1:]
	}
	t[len(t)-1] = rest
	return t, bytes.IndexByte(rest, '.') < 0
}

// num is token i as a number, 0 if it is not one.
func (t *ackToks) num(i int) uint64 {
	v, _ := strconv.ParseUint(string(t[i]), 10, 64)
	return v
}

// ack acknowledges sseq (and, for ack_policy all, everything before it);
// it returns the sequences acknowledged, for retention, appended to done.
func (c *consumer) ack(sseq uint64, done []uint64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ackLocked(sseq, done)
}

// ackLocked is ack with c.mu held; the sequences are appended to done,
// which may be nil.
func (c *consumer) ackLocked(sseq uint64, done []uint64) []uint64 {
	done = done[:0]
	switch c.mu.cfg.AckPolicy {
	case api.AckNone:
		return nil
	case api.AckAll, api.AckFlowControl:
		// flow_control acknowledges like all, from flow control replies.
		for len(c.mu.order) > 0 && c.mu.order[0] <= sseq {
			seq := c.mu.order[0]
			c.delPendingLocked(seq)
			done = append(done, seq)
		}
	default:
		if _, ok := c.mu.pending[sseq]; ok {
			c.delPendingLocked(sseq)
			done = append(done, sseq)
		}
	}
	if len(done) == 0 {
		return nil
	}
	c.dropFromRdqLocked(done)
	c.mu.lastAck = c.now()
	c.mu.active = c.mu.lastAck
	c.mu.dirty = true
	c.advanceAckFloorLocked()
	return done
}

func (c *consumer) dropFromRdqLocked(seqs []uint64) {
	if len(c.mu.rdq) == 0 {
		return
	}
	gone := map[uint64]bool{}
	for _, s := range seqs {
		gone[s] = true
	}
	c.mu.rdq = slices.DeleteFunc(c.mu.rdq, func(s uint64) bool { return gone[s] })
}

// advanceAckFloorLocked recomputes the ack floor: everything below the
// oldest pending delivery is acknowledged.
func (c *consumer) advanceAckFloorLocked() {
	if len(c.mu.pending) == 0 {
		c.mu.ackS, c.mu.ackC = c.mu.delivered, c.mu.dseq
		return
	}
	minSeq := c.mu.order[0]
	minP := c.mu.pending[minSeq]
	if minSeq > 0 && minSeq-1 > c.mu.ackS {
		c.mu.ackS = minSeq - 1
	}
	if minP.cseq > 0 && minP.cseq-1 > c.mu.ackC {
		c.mu.ackC = minP.cseq - 1
	}
}

// nak asks for redelivery, now or after the delay in the body
// ({"delay": nanoseconds} or a duration string).
func (c *consumer) nak(sseq uint64, arg []byte) {
	var delay time.Duration
	if len(arg) > 0 {
		var body struct {
			Delay json.RawMessage `json:"delay"`
		}
		if json.Unmarshal(arg, &body) == nil && len(body.Delay) > 0 {
			if n, err := strconv.ParseInt(string(body.Delay), 10, 64); err == nil {
				delay = time.Duration(n)
			} else if s, err := strconv.Unquote(string(body.Delay)); err == nil {
				delay, _ = time.ParseDuration(s)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.pending[sseq]
	if p == nil {
		return
	}
	p.due = unixNanos(c.now().Add(delay))
	c.noteDueLocked(p.due)
	c.mu.active = c.now()
}

// progress resets the ack wait of an in-progress message (+WPI).
func (c *consumer) progress(sseq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.mu.pending[sseq]; p != nil {
		p.due = unixNanos(c.now().Add(c.ackWaitLocked(p.dc)))
		c.mu.active = c.now()
	}
}

// term stops redelivery of a message without processing it (+TERM).
// It returns the sequence if it was pending, for retention.
func (c *consumer) term(sseq uint64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.pending[sseq]; !ok {
		return nil
	}
	c.delPendingLocked(sseq)
	c.dropFromRdqLocked([]uint64{sseq})
	c.mu.dirty = true
	c.advanceAckFloorLocked()
	return []uint64{sseq}
}

// onFlowControl handles a push client's answer to a flow control request.
// Only the answer to the latest request counts, as on nats-server. For
// ack_policy flow_control the answer is also the acknowledgement: its
// Nats-Last-Consumer / Nats-Last-Stream headers name the last delivery the
// client has taken (a sourcing stream: stored), and everything up to it is
// acknowledged as by an ack_policy all ack (fcAckLocked).
func (c *consumer) onFlowControl(subj, _, hdr, _ []byte) {
	c.mu.Lock()
	if string(subj) != c.mu.fcPending {
		c.mu.Unlock()
		return
	}
	c.mu.fcPending = ""
	var removable []uint64
	if c.mu.cfg.AckPolicy == api.AckFlowControl {
		removable = c.fcAckLocked(hdr)
	}
	c.mu.Unlock()
	if len(removable) > 0 {
		c.s.acked(c.a, removable, nil)
	}
	c.wake()
}

// fcAckLocked applies the acknowledgement a flow control reply carries.
// A reply without Nats-Last-Stream (a client that only answers, as
// nats.go does) acknowledges nothing; one whose delivery or stream
// sequence is not above the ack floor is old news (nats-server's rule,
// which also makes a Nats-Last-Consumer of 0 a no-op).
func (c *consumer) fcAckLocked(hdr []byte) []uint64 {
	lsseq, err := strconv.ParseUint(string(headerValue(hdr, api.HeaderLastStream)), 10, 64)
	if err != nil || lsseq == 0 {
		return nil
	}
	ldseq, _ := strconv.ParseUint(string(headerValue(hdr, api.HeaderLastConsumer)), 10, 64)
	if ldseq <= c.mu.ackC || lsseq <= c.mu.ackS {
		return nil
	}
	return c.ackLocked(lsseq, nil)
}

// pull queues a pull request (CONSUMER.MSG.NEXT, or +NXT).
func (c *consumer) pull(reply string, body []byte) {
	// The checks run in nats-server's order, with its words.
	cfg := c.config()
	if cfg.DeliverSubject != "" {
		c.a.acc.Publish(reply, "", []byte("NATS/1.0 409 Consumer is push based\r\n\r\n"), nil)
		return
	}
	req, err := api.ParsePullRequest(body)
	if err != nil {
		c.a.acc.Publish(reply, "", []byte(api.StatusBadPullRequest(err).Line()+"\r\n\r\n"), nil)
		return
	}
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if reject := pullLimits(cfg, &req); reject != "" {
		c.a.acc.Publish(reply, "", []byte("NATS/1.0 409 "+reject+"\r\n\r\n"), nil)
		return
	}
	now := c.now()
	r := &pullRequest{reply: reply, batch: req.Batch, maxBytes: max(req.MaxBytes, 0), noWait: req.NoWait,
		heartbeat: req.Heartbeat, lastHB: now, group: req.Group, minPending: req.MinPending,
		minAckPending: req.MinAckPending, pinID: req.ID, priority: req.Priority}
	if req.Expires != 0 {
		r.expires = now.Add(req.Expires)
	}
	c.mu.Lock()
	if status := c.checkPriorityLocked(&req.PriorityGroup, now); status != "" {
		c.mu.Unlock()
		c.a.acc.Publish(reply, "", []byte("NATS/1.0 "+status+"\r\n\r\n"), nil)
		return
	}
	c.mu.active = now
	if max := cfg.MaxWaiting; max > 0 && len(c.mu.waiting) >= max {
		// Requests whose requesters left do not count.
		c.mu.waiting = slices.DeleteFunc(c.mu.waiting, func(w *pullRequest) bool { return !c.a.acc.HasInterest(w.reply) })
	}
	if max := cfg.MaxWaiting; max > 0 && len(c.mu.waiting) >= max {
		c.mu.Unlock()
		// A request with heartbeats hears nothing: its client would
		// only retry at once (nats-server does the same).
		if r.heartbeat <= 0 {
			c.a.acc.Publish(reply, "", hdrMaxWaiting, nil)
		}
		return
	}
	if r.noWait && r.expires.IsZero() && c.numPending() == 0 && len(c.mu.rdq) == 0 && !c.redeliverableLocked(now) {
		c.mu.Unlock()
		c.a.acc.Publish(reply, "", hdrNoMessages, nil)
		return
	}
	c.mu.waiting = append(c.mu.waiting, r)
	c.mu.Unlock()
	c.wake()
}

// redeliverableLocked reports whether some pending message is due now.
func (c *consumer) redeliverableLocked(now time.Time) bool {
	for _, p := range c.mu.pending {
		if p.due <= now.UnixNano() {
			return true
		}
	}
	return false
}

// pullLimits checks a pull request against the consumer's max_batch,
// max_expires and max_bytes; it returns the 409 text or "".
func pullLimits(cfg *api.ConsumerConfig, req *api.PullRequest) string {
	switch {
	case cfg.MaxRequestBatch > 0 && req.Batch > cfg.MaxRequestBatch:
		return "Exceeded MaxRequestBatch of " + strconv.Itoa(cfg.MaxRequestBatch)
	case cfg.MaxRequestExpires > 0 && req.Expires > cfg.MaxRequestExpires:
		return "Exceeded MaxRequestExpires of " + cfg.MaxRequestExpires.String()
	case cfg.MaxRequestMaxBytes > 0 && req.MaxBytes > cfg.MaxRequestMaxBytes:
		return "Exceeded MaxRequestMaxBytes of " + strconv.Itoa(cfg.MaxRequestMaxBytes)
	}
	return ""
}

func (c *consumer) config() *api.ConsumerConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.cfg
}

// ackedLocked reports whether this consumer is done with seq (on subj):
// delivered and acknowledged, or not interested at all.
func (c *consumer) doneWith(seq uint64, subj string) bool {
	if !c.matches(subj) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, pending := c.mu.pending[seq]; pending {
		return false
	}
	if slices.Contains(c.mu.lps, seq) {
		return false
	}
	return seq < c.mu.sseq || seq <= c.mu.ackS
}

// msgAdvisory publishes a per-message consumer advisory (nak, terminate).
// toks are the ack subject's delivered.sseq.cseq.ts.pending tokens.
func (c *consumer) msgAdvisory(kind, typ string, toks ackToks, reason string) {
	sseq, cseq, dc := toks.num(1), toks.num(2), toks.num(0)
	adv := map[string]any{
		"type": typ, "id": randomName() + randomName(), "timestamp": time.Now().UTC(),
		"stream": c.stream, "consumer": c.name, "consumer_seq": cseq, "stream_seq": sseq, "deliveries": dc,
	}
	if reason != "" {
		adv["reason"] = reason
	}
	c.a.advise("$JS.EVENT.ADVISORY.CONSUMER."+kind+"."+c.stream+"."+c.name, adv)
}

// sampleAck publishes the ack metric for the share of acks sample_freq
// asks for ("30" or "30%").
func (c *consumer) sampleAck(toks ackToks) {
	freq := strings.TrimSuffix(strings.TrimSpace(c.config().SampleFrequency), "%")
	if freq == "" {
		return
	}
	pct, err := strconv.Atoi(freq)
	if err != nil || pct <= 0 || mathrand.IntN(100) >= pct {
		return
	}
	sseq, cseq, dc := toks.num(1), toks.num(2), toks.num(0)
	ts, _ := strconv.ParseInt(string(toks[3]), 10, 64)
	c.a.advise("$JS.EVENT.METRIC.CONSUMER.ACK."+c.stream+"."+c.name, map[string]any{
		"type": "io.nats.jetstream.metric.v1.consumer_ack", "id": randomName() + randomName(),
		"timestamp": time.Now().UTC(), "stream": c.stream, "consumer": c.name,
		"consumer_seq": cseq, "stream_seq": sseq, "ack_time": time.Now().UnixNano() - ts, "deliveries": dc,
	})
}

// addPendingLocked records an outstanding delivery.
// Invariant: order holds exactly the keys of pending, ascending.
func (c *consumer) addPendingLocked(seq uint64, p *pendingMsg) {
	if _, ok := c.mu.pending[seq]; !ok {
		i, _ := slices.BinarySearch(c.mu.order, seq)
		c.mu.order = slices.Insert(c.mu.order, i, seq)
	}
	c.mu.pending[seq] = p
	c.noteDueLocked(p.due)
}

// noteDueLocked keeps nextDue at or before the earliest redelivery time,
// so the loop scans pending only when something may be due.
func (c *consumer) noteDueLocked(due int64) {
	if c.mu.nextDue == 0 || due < c.mu.nextDue {
		c.mu.nextDue = due
	}
}

// delPendingLocked forgets an outstanding delivery. Acks mostly arrive in
// order, so the common case trims the front.
func (c *consumer) delPendingLocked(seq uint64) {
	if _, ok := c.mu.pending[seq]; !ok {
		return
	}
	delete(c.mu.pending, seq)
	if len(c.mu.order) > 0 && c.mu.order[0] == seq {
		c.mu.order = c.mu.order[1:]
		return
	}
	if i, ok := slices.BinarySearch(c.mu.order, seq); ok {
		c.mu.order = slices.Delete(c.mu.order, i, i+1)
	}
}
