package jetstream

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Atomic batch publish, as nats-server 2.12+ does it: a publisher sends
// messages carrying Nats-Batch-Id and Nats-Batch-Sequence (1, 2, …), the
// last one also Nats-Batch-Commit ("1", or "eob": end the batch without
// storing this message). Until the commit the messages are held here,
// in memory, per stream; the commit hands them to the apply path as one
// proposal, which stores every one of them or none (batch_apply.go), in
// one group, hence one atomic write and one replicated entry.
//
// Staging runs on the publisher's goroutine, as capture does: it copies
// and checks, never waits for disk. What staged batches hold is bounded
// by nats-server's limits (open batches per stream and per node, messages
// per batch, the idle timeout) and, since every stream here shares the
// node's memory, by bytes: a stream's open batches by max_buffered_size,
// the node's by node_max_buffered_size.

// nats-server's defaults for atomic batches (jetstream.limits.batch).
const (
	DefaultBatchTimeout           = 10 * time.Second
	DefaultBatchInflightPerStream = 50
	DefaultBatchInflightTotal     = 1000
	DefaultBatchMaxMsgs           = 1000
	// maxBatchIDLen is the longest Nats-Batch-Id nats-server accepts.
	maxBatchIDLen = 64
)

// BatchLimits bound atomic batches, as nats-server's jetstream { limits {
// batch { max_inflight_per_stream, max_inflight_total, max_msgs, timeout
// } } }. Zero takes the default.
type BatchLimits struct {
	MaxInflightPerStream int
	MaxInflightTotal     int
	MaxMsgs              int
	// Timeout abandons a batch that received nothing for this long.
	Timeout time.Duration
}

// withDefaults fills in the limits left at zero.
func (l BatchLimits) withDefaults() BatchLimits {
	if l.MaxInflightPerStream <= 0 {
		l.MaxInflightPerStream = DefaultBatchInflightPerStream
	}
	if l.MaxInflightTotal <= 0 {
		l.MaxInflightTotal = DefaultBatchInflightTotal
	}
	if l.MaxMsgs <= 0 {
		l.MaxMsgs = DefaultBatchMaxMsgs
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultBatchTimeout
	}
	return l
}

// batchNode counts what the node's open batches hold.
type batchNode struct {
	open   atomic.Int64 // open atomic batches
	staged atomic.Int64 // bytes their messages hold
	fast   atomic.Int64 // open fast batches (fastbatch.go)
}

// openBatches is a stream's open atomic batches, by id.
type openBatches struct {
	mu struct {
		sync.Mutex
		open  map[string]*atomicBatch // guarded by mu
		bytes int64                   // what they hold; guarded by mu
		fast  map[string]*fastBatch   // open fast batches; guarded by mu
		// out holds the fast batch replies decided and not yet sent, in
		// the order they were decided; flushing is set while one
		// goroutine sends them (stream.flushFast). Guarded by mu.
		out      fastOut
		flushing bool
	}
}

// atomicBatch is one open batch.
type atomicBatch struct {
	id    string
	msgs  []batchMsg
	bytes int64
	// gen counts the messages staged; a timer armed at gen n abandons
	// the batch only if nothing came after it.
	gen   uint64
	timer *time.Timer
}

// batchMsg is one staged message; it owns its bytes.
type batchMsg struct {
	subject   string
	hdr, data []byte
}

// atomicCommit is a committed batch on its way through the apply path.
type atomicCommit struct {
	id    string
	msgs  []batchMsg
	bytes int64
	// seqs and subjects are what each message was stored as, filled in
	// by the apply step (for republish once durable).
	seqs     []uint64
	subjects []string
}

// Why a batch was abandoned, as nats-server's advisory says.
const (
	abandonTimeout    = "timeout"
	abandonLarge      = "large"
	abandonIncomplete = "incomplete"
)

// admitBatchMsg runs the checks nats-server makes of a batch message,
// of either kind, before it looks at the batch: a sealed stream, a full
// apply path, no room for the message. It returns the stream's config
// as it was then.
func (s *stream) admitBatchMsg(a *jsAccount, subject, hdr, msg []byte) (*api.StreamConfig, *api.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.mu.cfg
	switch {
	case cfg.Sealed:
		return cfg, api.NewStreamSealedError()
	case s.ap.full():
		return cfg, api.NewInsufficientResourcesError()
	default:
		return cfg, s.checkMsgRoomLocked(a, msgSize(string(subject), hdr, msg))
	}
}

// captureAtomic stages or commits one message of an atomic batch. It
// answers as nats-server does: an error on the message's reply subject
// (when it has one and the stream acknowledges), an empty message for a
// staged one, the PubAck with batch and count once the commit is durable.
func (s *stream) captureAtomic(a *jsAccount, id string, subject, reply, hdr, msg []byte, routed bool) <-chan struct{} {
	lim := s.e.opts.Batch.withDefaults()
	cfg, err := s.admitBatchMsg(a, subject, hdr, msg)
	canRespond := !cfg.NoAck && len(reply) > 0
	refuse := func(e *api.Error) <-chan struct{} {
		if canRespond {
			b, _ := json.Marshal(api.PubAckResponse{Error: e, PubAck: &api.PubAck{Stream: cfg.Name}})
			a.acc.Publish(string(reply), "", nil, b)
		}
		return nil
	}
	max := int(cfg.MaxMsgSize)
	switch {
	case err != nil:
		return refuse(err)
	case max > 0 && (len(hdr) > max || len(msg) > max-len(hdr)):
		return refuse(api.NewMessageTooLargeError())
	case !cfg.AllowAtomicPublish:
		return refuse(api.NewAtomicPublishDisabledError())
	case len(id) > maxBatchIDLen:
		return refuse(api.NewAtomicPublishInvalidBatchIDError())
	}
	seq, serr := strconv.ParseUint(string(headerValue(hdr, api.HeaderBatchSeq)), 10, 64)
	if serr != nil {
		return refuse(api.NewAtomicPublishMissingSeqError())
	}
	var commit, eob, badCommit bool
	if c := headerValue(hdr, api.HeaderBatchCommit); len(c) > 0 {
		commit, eob = true, string(c) == "eob"
		badCommit = !eob && string(c) != "1"
	}
	// size is what the batch counts toward max_msgs: an end-of-batch
	// commit is not stored.
	size := seq
	if eob {
		size--
	}

	bs := &s.batches
	bs.mu.Lock()
	b := bs.mu.open[id]
	if b == nil {
		switch {
		case seq != 1 && size > uint64(lim.MaxMsgs):
			bs.mu.Unlock()
			return refuse(api.NewAtomicPublishTooLargeBatchError(lim.MaxMsgs))
		case seq != 1:
			bs.mu.Unlock()
			return refuse(api.NewAtomicPublishIncompleteBatchError())
		case len(bs.mu.open)+1 > lim.MaxInflightPerStream:
			bs.mu.Unlock()
			return refuse(api.NewAtomicPublishTooManyInflightError())
		}
		if s.e.batches.open.Add(1) > int64(lim.MaxInflightTotal) {
			s.e.batches.open.Add(-1)
			bs.mu.Unlock()
			return refuse(api.NewAtomicPublishTooManyInflightError())
		}
		b = &atomicBatch{id: id}
		if bs.mu.open == nil {
			bs.mu.open = map[string]*atomicBatch{}
		}
		bs.mu.open[id] = b
	}
	if badCommit {
		s.dropBatchLocked(b)
		bs.mu.Unlock()
		return refuse(api.NewAtomicPublishInvalidBatchCommitError())
	}
	b.gen++
	if b.gen != seq || (seq == 1 && eob) {
		// A gap (or a repeat): the batch can never be whole.
		s.dropBatchLocked(b)
		bs.mu.Unlock()
		s.adviseAbandoned(a, id, abandonIncomplete)
		return refuse(api.NewAtomicPublishIncompleteBatchError())
	}
	if size > uint64(lim.MaxMsgs) {
		s.dropBatchLocked(b)
		bs.mu.Unlock()
		s.adviseAbandoned(a, id, abandonLarge)
		return refuse(api.NewAtomicPublishTooLargeBatchError(lim.MaxMsgs))
	}
	if !eob {
		n := int64(len(subject) + len(hdr) + len(msg))
		fl := s.e.flow.lim
		if bs.mu.bytes+n > fl.streamBytes || s.e.batches.staged.Load()+n > fl.nodeBytes {
			// Our bound, not nats-server's: staged batches share the
			// node's memory with every tenant.
			s.dropBatchLocked(b)
			bs.mu.Unlock()
			s.adviseAbandoned(a, id, abandonLarge)
			return refuse(api.NewAtomicPublishTooManyInflightError())
		}
		buf := make([]byte, 0, n)
		buf = append(append(append(buf, subject...), hdr...), msg...)
		m := batchMsg{subject: string(buf[:len(subject)])}
		if len(hdr) > 0 {
			m.hdr = buf[len(subject) : len(subject)+len(hdr) : len(subject)+len(hdr)]
		}
		m.data = buf[len(subject)+len(hdr):]
		b.msgs = append(b.msgs, m)
		b.bytes += n
		bs.mu.bytes += n
		s.e.batches.staged.Add(n)
	} else {
		// The batch ends with the message before, which is stored as
		// if it had carried the commit itself.
		last := &b.msgs[len(b.msgs)-1]
		last.hdr = addHeader(last.hdr, api.HeaderBatchCommit, "1")
	}
	if !commit {
		s.armBatchTimerLocked(a, b, lim.Timeout)
		bs.mu.Unlock()
		if canRespond {
			// Staged: an empty reply, as nats-server sends.
			a.acc.Publish(string(reply), "", nil, nil)
		}
		return nil
	}
	s.dropBatchLocked(b)
	bs.mu.Unlock()
	return s.submitBatch(a, b, reply, routed)
}

// submitBatch hands a committed batch to the apply path as one proposal,
// through the same backlog bound as a single publish.
func (s *stream) submitBatch(a *jsAccount, b *atomicBatch, reply []byte, routed bool) <-chan struct{} {
	p := &proposal{s: s, kind: propBatch, acct: a, reply: string(reply),
		batch: &atomicCommit{id: b.id, msgs: b.msgs, bytes: b.bytes}}
	p.held = int64(p.size())
	wait, ok := s.e.flow.admit(s, p.held, routed)
	if !ok {
		s.refuseBusy(a, nil, reply)
		return nil
	}
	p.done = batchDone
	if !s.ap.submit(p) {
		batchDone(p, s.ap.closedResult())
		return nil
	}
	return wait
}

// armBatchTimerLocked (re)starts b's idle timer: fired with nothing staged
// since, it abandons the batch. Called with s.batches.mu held.
func (s *stream) armBatchTimerLocked(a *jsAccount, b *atomicBatch, d time.Duration) {
	if b.timer != nil {
		b.timer.Stop()
	}
	gen := b.gen
	b.timer = time.AfterFunc(d, func() {
		bs := &s.batches
		bs.mu.Lock()
		live := bs.mu.open[b.id] == b && b.gen == gen
		if live {
			s.dropBatchLocked(b)
		}
		bs.mu.Unlock()
		if live {
			s.adviseAbandoned(a, b.id, abandonTimeout)
		}
	})
}

// dropBatchLocked closes b: it leaves the open set and gives back what it
// held. Its messages stay with b, for a commit to use. Called with
// s.batches.mu held; a batch already closed is left alone.
func (s *stream) dropBatchLocked(b *atomicBatch) {
	bs := &s.batches
	if bs.mu.open[b.id] != b {
		return
	}
	delete(bs.mu.open, b.id)
	if b.timer != nil {
		b.timer.Stop()
	}
	bs.mu.bytes -= b.bytes
	s.e.batches.staged.Add(-b.bytes)
	s.e.batches.open.Add(-1)
}

// openBatchCount reports the stream's open batches (tests, monitoring).
func (s *stream) openBatchCount() int {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	return len(s.batches.mu.open)
}

// batchAbandonedAdvisory is nats-server's
// io.nats.jetstream.advisory.v1.stream_batch_abandoned.
type batchAbandonedAdvisory struct {
	Type   string    `json:"type"`
	ID     string    `json:"id"`
	Time   time.Time `json:"timestamp"`
	Stream string    `json:"stream"`
	Domain string    `json:"domain,omitempty"`
	Batch  string    `json:"batch"`
	Reason string    `json:"reason"`
}

// adviseAbandoned publishes $JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<stream>
// in the stream's account; a stream deleted meanwhile says nothing.
func (s *stream) adviseAbandoned(a *jsAccount, id, reason string) {
	s.mu.Lock()
	name, removed := s.mu.cfg.Name, s.mu.removed
	s.mu.Unlock()
	if removed {
		return
	}
	a.advise("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED."+name, batchAbandonedAdvisory{
		Type: "io.nats.jetstream.advisory.v1.stream_batch_abandoned", ID: randomName() + randomName(),
		Time: time.Now().UTC(), Stream: name, Domain: s.e.opts.Domain, Batch: id, Reason: reason})
}

// fastBatchSuffix ends the reply subject of a message of nats-server
// 2.15's fast batch publish (allow_batched): the reply carries the batch
// id, flow, gap mode, sequence and operation as tokens before it.
const fastBatchSuffix = ".$FI"

// isFastBatchReply reports whether reply addresses a fast batch, as
// nats-server recognises one: by the suffix alone.
func isFastBatchReply(reply []byte) bool {
	n := len(reply)
	return n > len(fastBatchSuffix) && string(reply[n-len(fastBatchSuffix):]) == fastBatchSuffix
}
