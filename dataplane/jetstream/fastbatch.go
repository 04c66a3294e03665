package jetstream

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Fast batch publish (allow_batched, nats-server 2.15): a flow-controlled
// batch that is not atomic. Each message is stored on its own, as a plain
// publish; what makes it a batch is its reply subject,
// <prefix>.<id>.<flow>.<gap mode>.<seq>.<op>.$FI, and the replies: a flow
// ack ({"type":"ack","seq":…,"msgs":…}) every <msgs> messages made
// durable, a gap report ({"type":"gap"}) for a sequence out of order, an
// error report ({"type":"err"}) for a message refused, and the PubAck
// with batch and count once the commit (op 2, or 3: end without storing
// this message) and everything before it is durable. With gap mode
// "fail" a gap or an error ends the batch there.
//
// The batch's state changes in the apply path (fastApplyLocked), in the
// order the stream's proposals apply, and as each stored message becomes
// durable (fastDurable), as nats-server's replicated streams track
// theirs: pending counts messages applied and not yet durable.

// Fast batch operations, the reply subject's next-to-last token.
const (
	fastOpStart = iota
	fastOpAppend
	fastOpCommit
	fastOpCommitEOB
	fastOpPing
)

// nats-server's defaults for fast batches.
const (
	defaultFastInflightPerStream = 1000
	defaultFastInflightTotal     = 50_000
)

// fastMsg is what a fast batch message's reply subject says.
type fastMsg struct {
	id          string
	seq         uint64
	flow        uint16
	ping, gapOK bool
	commit, eob bool
	stored      bool // set by the apply step: stored, so pending
}

// parseFastReply reads a fast batch reply subject. ok is false when the
// suffix is there but the tokens are not a valid batch.
func parseFastReply(reply string) (m fastMsg, ok bool) {
	t := strings.Split(strings.TrimSuffix(reply, fastBatchSuffix), ".")
	if len(t) < 6 {
		return m, false
	}
	t = t[len(t)-5:]
	op, err := strconv.ParseInt(t[4], 10, 64)
	if err != nil || op < fastOpStart || op > fastOpPing {
		return m, false
	}
	m.ping, m.eob = op == fastOpPing, op == fastOpCommitEOB
	m.commit = m.eob || op == fastOpCommit
	seq, err := strconv.ParseUint(t[3], 10, 64)
	if err != nil || seq == 0 || seq == math.MaxUint64 || (seq == 1 && m.eob) ||
		(op == fastOpStart && seq != 1) || (op == fastOpAppend && seq <= 1) {
		return m, false
	}
	m.seq = seq
	switch t[2] {
	case "ok":
		m.gapOK = true
	case "fail":
	default:
		return m, false
	}
	flow, _ := strconv.ParseInt(t[1], 10, 64)
	switch {
	case flow <= 0:
		flow = 10
	case flow > math.MaxUint16:
		flow = math.MaxUint16
	}
	m.flow = uint16(flow)
	m.id = t[0]
	return m, true
}

// fastBatch is one open fast batch, guarded by its stream's batches.mu.
type fastBatch struct {
	id      string
	lseq    uint64 // highest batch sequence received
	sseq    uint64 // stream sequence of the last message made durable
	pseq    uint64 // highest batch sequence durable (≤ lseq)
	fseq    uint64 // batch sequence of the last flow ack (≤ pseq)
	pending uint32 // stored messages not yet durable
	ack     uint16 // a flow ack every ack messages
	maxAck  uint16 // the most the client allows
	gapOK   bool
	commit  bool
	gen     uint64
	timer   *time.Timer
}

// captureFast checks a fast batch message as nats-server does before it
// looks at the batch, and hands it to the apply path.
func (s *stream) captureFast(a *jsAccount, subject, reply, hdr, msg []byte, routed bool) <-chan struct{} {
	cfg, err := s.admitBatchMsg(a, subject, hdr, msg)
	fm, ok := parseFastReply(string(reply))
	max := int(cfg.MaxMsgSize)
	switch {
	case err != nil:
	case max > 0 && (len(hdr) > max || len(msg) > max-len(hdr)):
		err = api.NewMessageTooLargeError()
	case !cfg.AllowBatchPublish:
		err = api.NewBatchPublishDisabledError()
	case !ok:
		err = api.NewBatchPublishInvalidPatternError()
	case len(fm.id) > maxBatchIDLen:
		err = api.NewBatchPublishInvalidBatchIDError()
	}
	if err != nil {
		if !cfg.NoAck {
			s.fastReply(a, string(reply), errorPubAckOf(cfg.Name, err))
		}
		return nil
	}
	size := len(subject) + len(reply) + len(hdr) + len(msg)
	wait, admitted := s.e.flow.admit(s, int64(size), routed)
	if !admitted {
		s.refuseBusy(a, subject, reply)
		return nil
	}
	p := &proposal{s: s, kind: propFastBatch, acct: a, held: int64(size), fast: &fm}
	p.copyIn(subject, reply, hdr, msg)
	p.done = fastDone
	if !s.ap.submit(p) {
		fastDone(p, s.ap.closedResult())
		return nil
	}
	return wait
}

// errorPubAckOf is errorPubAck for an API error.
func errorPubAckOf(stream string, err *api.Error) []byte {
	b, _ := json.Marshal(api.PubAckResponse{Error: err, PubAck: &api.PubAck{Stream: stream}})
	return b
}

// fastReply publishes a reply to a fast batch message.
func (s *stream) fastReply(a *jsAccount, reply string, b []byte) {
	if reply != "" {
		a.acc.Publish(reply, "", nil, b)
	}
}

// fastOut holds replies decided under the stream's locks, to publish once
// they are released: a reply subject may be one a stream captures, whose
// capture takes those locks.
type fastOut []fastOutMsg

type fastOutMsg struct {
	reply string
	body  []byte
}

func (o *fastOut) add(reply string, b []byte) {
	if reply != "" {
		*o = append(*o, fastOutMsg{reply, b})
	}
}

// flushFast sends the stream's fast batch replies decided so far, in the
// order they were decided, outside the stream's locks. Invariant: one
// goroutine at a time sends them, so a reply decided later never
// overtakes one decided earlier: the apply step's error report for a
// message comes before the PubAck ending its batch that the previous
// message's sync sends. A caller that finds another sending leaves its
// replies to it.
func (s *stream) flushFast(a *jsAccount) {
	bs := &s.batches
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.mu.flushing {
		return
	}
	bs.mu.flushing = true
	for len(bs.mu.out) > 0 {
		out := bs.mu.out
		bs.mu.out = nil
		bs.mu.Unlock()
		for _, r := range out {
			a.acc.Publish(r.reply, "", nil, r.body)
		}
		bs.mu.Lock()
	}
	bs.mu.flushing = false
}

// fastFlow is the flow ack for batch sequence seq.
func fastFlow(seq uint64, msgs uint16) []byte {
	return []byte(`{"type":"ack","seq":` + strconv.FormatUint(seq, 10) + `,"msgs":` + strconv.Itoa(int(msgs)) + `}`)
}

// fastCommitAck is the PubAck ending a fast batch.
func (s *stream) fastCommitAck(name string, seq uint64, id string, count uint64) []byte {
	b := appendPubAck(nil, name, seq, false, s.e.opts.Domain)
	b = append(b[:len(b)-1], `,"batch":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, count, 10)
	return append(b, '}')
}

// fastApplyLocked applies one fast batch message: the batch's state
// machine as nats-server runs it before proposing, then, for a message
// to store, the ordinary write. Called with s.mu held on the applier.
func (s *stream) fastApplyLocked(p *proposal, ap *applier) result {
	fm, a, cfg := p.fast, p.acct, s.mu.cfg
	canRespond := !cfg.NoAck && p.reply != ""
	out := &s.batches.mu.out // guarded by the lock taken below
	say := func(b []byte) {
		if canRespond {
			out.add(p.reply, b)
		}
	}
	bs := &s.batches
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.mu.fast[fm.id]
	if b == nil {
		if fm.seq != 1 || fm.ping {
			say(errorPubAckOf(cfg.Name, api.NewBatchPublishUnknownBatchIDError()))
			return result{}
		}
		lim := s.e.opts.Batch
		perStream, total := defaultFastInflightPerStream, defaultFastInflightTotal
		if lim.MaxInflightPerStream > 0 {
			perStream = lim.MaxInflightPerStream
		}
		if lim.MaxInflightTotal > 0 {
			total = lim.MaxInflightTotal
		}
		if len(bs.mu.fast)+1 > perStream {
			say(errorPubAckOf(cfg.Name, api.NewBatchPublishTooManyInflightError()))
			return result{}
		}
		if s.e.batches.fast.Add(1) > int64(total) {
			s.e.batches.fast.Add(-1)
			say(errorPubAckOf(cfg.Name, api.NewBatchPublishTooManyInflightError()))
			return result{}
		}
		b = &fastBatch{id: fm.id, gapOK: fm.gapOK, maxAck: fm.flow}
		if bs.mu.fast == nil {
			bs.mu.fast = map[string]*fastBatch{}
		}
		bs.mu.fast[fm.id] = b
		s.fastInitLocked(b)
	}
	s.fastArmLocked(b)
	if fm.ping {
		flow := true
		if fm.seq > b.lseq {
			say([]byte(`{"type":"gap","last_seq":` + strconv.FormatUint(b.lseq+1, 10) + `,"seq":` + strconv.FormatUint(fm.seq+1, 10) + `}`))
			if b.gapOK {
				b.lseq = fm.seq
				if b.pending == 0 {
					b.pseq = b.lseq
				}
				flow = !s.fastFlowLocked(out, b, p.reply)
			} else if s.fastCommitLocked(out, b, p.reply) {
				s.dropFastLocked(b)
				flow = false
			}
		}
		if flow {
			say(fastFlow(b.fseq, b.ack))
		}
		return result{}
	}
	if b.commit {
		return result{} // ending already: the client waits for the PubAck
	}
	b.lseq++
	if b.lseq != fm.seq {
		say([]byte(`{"type":"gap","last_seq":` + strconv.FormatUint(b.lseq, 10) + `,"seq":` + strconv.FormatUint(fm.seq, 10) + `}`))
		if b.gapOK && fm.seq > b.lseq {
			b.lseq = fm.seq
		} else {
			b.lseq--
			if s.fastCommitLocked(out, b, p.reply) {
				s.dropFastLocked(b)
			}
			return result{}
		}
	}
	if fm.commit {
		if fm.eob {
			b.lseq--
			if b.pending == 0 {
				b.pseq = b.lseq
			}
		}
		done := s.fastCommitLocked(out, b, p.reply)
		if fm.eob {
			if done {
				s.dropFastLocked(b)
			}
			return result{}
		}
	}
	if fm.seq == 1 && !fm.commit {
		say(fastFlow(0, b.ack))
	}
	mp := &proposal{s: s, kind: propMsg, acct: a, subject: p.subject, hdr: p.hdr, data: p.data}
	r := s.storeMsgLocked(mp, ap)
	p.subject = mp.subject // as stored, for republish
	if r.err != nil || r.dup {
		return s.fastRefusedLocked(p, b, r)
	}
	b.pending++
	fm.stored = true
	return r
}

// fastRefusedLocked handles a fast batch message the stream did not
// store: a duplicate is skipped; an error is reported, and ends the batch
// unless gaps are allowed.
func (s *stream) fastRefusedLocked(p *proposal, b *fastBatch, r result) result {
	fm, cfg := p.fast, s.mu.cfg
	replies := &s.batches.mu.out // guarded: the caller holds the batches' lock
	canRespond := !cfg.NoAck && p.reply != ""
	if r.dup {
		if b.pending == 0 {
			b.pseq = fm.seq
			s.fastFlowLocked(replies, b, p.reply)
		}
		if !fm.commit {
			return result{}
		}
	}
	if !b.gapOK && b.lseq == 1 {
		var out []byte
		if r.dup {
			out = appendPubAck(nil, cfg.Name, r.seq, true, s.e.opts.Domain)
			out = append(out[:len(out)-1], `,"batch":`+strconv.Quote(fm.id)+`,"count":`+strconv.FormatUint(fm.seq, 10)+`}`...)
		} else {
			out = errorPubAck(cfg.Name, r.err)
		}
		s.dropFastLocked(b)
		if canRespond {
			replies.add(p.reply, out)
		}
		return result{}
	}
	if !r.dup && canRespond {
		e, _ := json.Marshal(struct {
			Type  string     `json:"type"`
			Seq   uint64     `json:"seq"`
			Error *api.Error `json:"error"`
		}{"err", fm.seq, api.Prefer(r.err, api.NewStreamStoreFailedError(r.err))})
		replies.add(p.reply, e)
	}
	if b.gapOK && !fm.commit {
		return result{}
	}
	if !r.dup {
		b.lseq--
		if b.pending == 0 {
			b.pseq = b.lseq
		}
	}
	if s.fastCommitLocked(replies, b, p.reply) {
		s.dropFastLocked(b)
	}
	return result{}
}

// fastInitLocked sets the batch's flow: what the client asks, up to 500,
// while it is the stream's only fast batch; else one.
func (s *stream) fastInitLocked(b *fastBatch) {
	b.ack = min(500, b.maxAck)
	if len(s.batches.mu.fast) > 1 {
		b.ack = 1
	}
}

// fastCommitLocked marks b committing; with everything durable it answers
// the PubAck now and reports true (the batch is done).
func (s *stream) fastCommitLocked(out *fastOut, b *fastBatch, reply string) bool {
	b.commit = true
	if b.lseq != b.pseq {
		return false
	}
	if !s.mu.cfg.NoAck {
		out.add(reply, s.fastCommitAck(s.mu.cfg.Name, b.sseq, b.id, b.lseq))
	}
	return true
}

// fastFlowLocked sends a flow ack when enough messages became durable
// since the last one, adjusting the flow toward the stream's fair share.
// It reports whether it sent one.
func (s *stream) fastFlowLocked(out *fastOut, b *fastBatch, reply string) bool {
	return s.fastFlow(out, b, reply, s.mu.cfg.NoAck)
}

// fastFlow is fastFlowLocked for a caller that read the config before
// (noAck). Called with s.batches.mu held.
func (s *stream) fastFlow(out *fastOut, b *fastBatch, reply string, noAck bool) bool {
	am := uint64(b.ack)
	if b.pseq < b.fseq+am {
		return false
	}
	b.fseq += (b.pseq - b.fseq) / am * am
	share := uint16(max(500/len(s.batches.mu.fast), 1))
	share = min(share, b.maxAck)
	switch {
	case b.ack < share:
		b.ack = min(b.ack*2, share)
	case b.ack > share:
		b.ack = max(b.ack/2, share)
	}
	if reply != "" && !noAck {
		out.add(reply, fastFlow(b.fseq, b.ack))
	}
	return true
}

// fastArmLocked (re)starts b's idle timer: a fast batch idle for the
// batch timeout is dropped, without an advisory (as nats-server does).
func (s *stream) fastArmLocked(b *fastBatch) {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.gen++
	gen := b.gen
	b.timer = time.AfterFunc(s.e.opts.Batch.withDefaults().Timeout, func() {
		s.batches.mu.Lock()
		defer s.batches.mu.Unlock()
		if s.batches.mu.fast[b.id] == b && b.gen == gen {
			s.dropFastLocked(b)
		}
	})
}

// dropFastLocked closes b. Called with s.batches.mu held.
func (s *stream) dropFastLocked(b *fastBatch) {
	if s.batches.mu.fast[b.id] != b {
		return
	}
	delete(s.batches.mu.fast, b.id)
	if b.timer != nil {
		b.timer.Stop()
	}
	s.e.batches.fast.Add(-1)
}

// fastDone completes a fast batch message once its outcome is durable:
// the backlog room is given back, a stored message is republished and
// counted durable in its batch (fastDurable).
func fastDone(p *proposal, r result) {
	s := p.s
	s.e.flow.release(s, p.held)
	if !p.fast.stored {
		return
	}
	if r.err != nil {
		if !isFateUnknown(r.err) && p.reply != "" {
			p.acct.acc.Publish(p.reply, "", nil, errorPubAck(s.config().Name, r.err))
		}
		return
	}
	s.republish(p, r.seq)
	s.fastDurable(p, r.seq)
}

// fastDurable records that a stored message of the batch is durable: the
// batch's durable sequence moves, and a flow ack or the commit's PubAck
// goes out when due.
func (s *stream) fastDurable(p *proposal, seq uint64) {
	fm := p.fast
	cfg := s.config()
	defer s.flushFast(p.acct)
	bs := &s.batches
	bs.mu.Lock()
	defer bs.mu.Unlock()
	out := &bs.mu.out
	b := bs.mu.fast[fm.id]
	if b == nil {
		return
	}
	if b.pending > 0 {
		b.pending--
	}
	b.sseq = seq
	skipped := b.pending == 0
	if skipped {
		b.pseq = b.lseq
	} else {
		b.pseq = fm.seq
	}
	if b.lseq == b.pseq && b.commit {
		s.dropFastLocked(b)
		if cfg.NoAck || p.reply == "" {
			return
		}
		if skipped {
			out.add(p.reply, s.fastCommitAck(cfg.Name, b.sseq, fm.id, b.lseq))
		} else {
			out.add(p.reply, s.fastCommitAck(cfg.Name, seq, fm.id, fm.seq))
		}
		return
	}
	s.fastFlow(out, b, p.reply, cfg.NoAck)
}
