package jetstream

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// consumer is a view over a stream that delivers its messages (pull or
// push), tracks acknowledgements and redelivers what is not acknowledged.
//
// Threading: the consumer's own goroutine (run) delivers; ack handlers and
// API handlers change state under mu and kick it. Store reads see only
// committed messages, and the stream kicks its consumers after each commit.
type consumer struct {
	s         *stream
	a         *jsAccount
	name      string
	stream    string // the stream's name, kept here so no path takes s.mu under c.mu
	created   time.Time
	ackPrefix string // "$JS.ACK.<stream>.<consumer>."
	fcPrefix  string // "$JS.FC.<stream>.<consumer>."
	kick      chan struct{}
	quit      chan struct{}
	unsubs    []func() // set before the consumer is shared; taken under mu by stopSubs
	stopped   chan struct{}

	// Read by the stream's apply path without c.mu (lock order is s.mu
	// then c.mu, never the reverse): the filters, the next stream
	// sequence to deliver, and num_pending.
	filt atomic.Pointer[[]string]
	// fset holds filt as a subject.Set once there are more than
	// fsetMin filters, so a match costs per token, not per filter; nil
	// below that.
	fset  atomic.Pointer[subject.Set]
	sseqA atomic.Uint64
	npend atomic.Int64

	mu struct {
		sync.Mutex
		cfg     *api.ConsumerConfig
		filters []string // nil: every subject
		// dseq is the last consumer sequence handed out; sseq the next
		// stream sequence to look at for new messages; delivered the
		// stream sequence of the newest message delivered.
		dseq, sseq, delivered uint64
		// Invariant: ackS <= delivered; every pending seq is > ackS.
		ackC, ackS uint64
		pending    map[uint64]*pendingMsg // stream seq → outstanding delivery
		order      []uint64               // pending's keys, ascending
		nextDue    int64                  // no pending delivery is due before this (unix nanos); 0: unknown
		ahead      []store.Message        // read-ahead of matching messages at or after sseq
		aheadArr   []store.Message        // the list ahead is the rest of, from its start (recycleAheadLocked)
		// push is the route to the deliver subject (pushRouteLocked).
		push struct {
			subject string
			route   Route
		}
		// coldMsg is the last cold message fetched for delivery, so the
		// pass that fetched it (with mu released) finds it again.
		coldMsg store.Message
		aheadTo uint64   // the scans behind ahead covered everything below this
		rdq     []uint64 // stream seqs to deliver again, oldest first
		lps     []uint64 // last-per-subject seqs still to deliver first
		// maxed are stream seqs that reached max_deliver: like pending
		// redeliveries they count in num_redelivered, until they leave
		// the stream (nats-server's rule).
		maxed      []uint64
		waiting    []*pullRequest
		lastDel    time.Time // last delivery (for delivered.last_active)
		lastAck    time.Time
		active     time.Time // last sign of a client: a pull, an ack, interest
		lastHB     time.Time
		fcPending  string    // flow control reply we wait for, push only
		fcBytes    int       // bytes pushed since the last flow control request
		dirty      bool      // state changed since last persisted
		persisting bool      // a state write is queued
		persisted  time.Time // when the last state write was queued
		deleted    bool
		// Pacing: the stored time and wall time of the last delivery
		// (replay original), and the bytes sent in the current second
		// (rate limit).
		replayTs  int64
		replayAt  time.Time
		rateStart time.Time
		rateBytes int
		// pauseWatch is the pause deadline the consumer is waiting out,
		// so its end is announced once (pauseEndedLocked).
		pauseWatch time.Time
		// unwatch stops the deliver subject's interest watch (push).
		unwatch func()
		// The pinned client of a pinned_client consumer, if any.
		pinID, pinGroup string
		pinnedAt        time.Time
	}
}

// pendingMsg is one delivered, not yet acknowledged message.
type pendingMsg struct {
	cseq uint64
	ts   int64  // delivery time, unix nanos
	dc   uint64 // deliveries so far
	due  int64  // when to redeliver, unix nanos
}

// pullRequest is one waiting CONSUMER.MSG.NEXT request.
type pullRequest struct {
	reply     string
	route     Route // to reply, once a message went there (requestRouteLocked)
	batch     int
	maxBytes  int
	expires   time.Time // zero: no expiry
	noWait    bool
	heartbeat time.Duration
	lastHB    time.Time
	n, b      int // delivered so far: messages, bytes
	// Priority terms (ADR-42).
	group                     string
	minPending, minAckPending int64
	pinID                     string
	priority                  int
}

// keepsConsumer reports whether a consumer of s with config cfg is kept in
// the store (its config, its state, its deletion), so that it outlives
// the process serving it. A durable always is. An ephemeral is on a
// replicated stream: there the partition's next leader must find it, as
// a leadership move (the balancer's, a stepdown, a failover) would
// otherwise end it under clients that keep pulling or listening on a
// consumer nobody serves, which stock clients do not notice for as long
// as they wait (nats-server's ephemerals outlive a change of stream
// leader too). Its inactivity threshold still removes it, record and all,
// once its clients are gone. An R1 stream's ephemerals stay in memory:
// such a stream never changes leader, and they end with their node.
func (s *stream) keepsConsumer(cfg *api.ConsumerConfig) bool {
	return cfg.IsDurable() || groupOf(s.id) != 0
}

// consumerRecord is what the store keeps of a consumer's config.
type consumerRecord struct {
	Config  *api.ConsumerConfig `json:"config"`
	Created time.Time           `json:"created"`
}

// consumerState is the persisted delivery/ack state.
type consumerState struct {
	DSeq      uint64      `json:"dseq"`
	SSeq      uint64      `json:"sseq"`
	Delivered uint64      `json:"delivered"`
	AckC      uint64      `json:"ack_c"`
	AckS      uint64      `json:"ack_s"`
	Pending   [][4]uint64 `json:"pending,omitempty"` // sseq, cseq, ts, dc
	Maxed     []uint64    `json:"maxed,omitempty"`
	LPS       []uint64    `json:"lps,omitempty"`
}

func newConsumer(s *stream, a *jsAccount, name string, cfg *api.ConsumerConfig, created time.Time) *consumer {
	sname := s.name()
	c := &consumer{
		s: s, a: a, name: name, stream: sname, created: created,
		ackPrefix: "$JS.ACK." + sname + "." + name + ".",
		fcPrefix:  "$JS.FC." + sname + "." + name + ".",
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
	}
	c.mu.cfg = cfg
	c.setFiltersLocked(cfg)
	c.mu.pending = map[uint64]*pendingMsg{}
	c.mu.active = c.now()
	return c
}

// now is the engine's clock. Every delivery, redelivery and expiry time
// the consumer keeps comes from it, so tests can drive them.
func (c *consumer) now() time.Time { return c.s.e.opts.Now() }

// wake makes the delivery loop look for work; it never blocks.
func (c *consumer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// fsetMin is the filter count above which matching goes through a
// subject.Set: below it, comparing each filter is as quick.
const fsetMin = 8

// setFiltersLocked takes cfg's filters for delivery and for the stream's
// apply path (filt, fset).
func (c *consumer) setFiltersLocked(cfg *api.ConsumerConfig) {
	c.mu.filters = cfg.Filters()
	f := c.mu.filters
	var set *subject.Set
	if len(f) > fsetMin {
		set = subject.NewSet(f)
	}
	c.fset.Store(set)
	c.filt.Store(&f)
}

// matches reports whether subj passes the consumer's filters; safe
// without c.mu. It runs on the apply path every stream shares, once per
// consumer and message, so its cost must not grow with the filters.
func (c *consumer) matches(subj string) bool {
	if set := c.fset.Load(); set != nil {
		return set.Match(subj)
	}
	filters := *c.filt.Load()
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if subject.Matches(f, subj) {
			return true
		}
	}
	return false
}

// setSSeqLocked moves the new-message cursor.
func (c *consumer) setSSeqLocked(seq uint64) {
	c.mu.sseq = seq
	c.sseqA.Store(seq)
}

// position sets where delivery starts, from the deliver policy and the
// stream state st (read before taking c.mu).
func (c *consumer) position(st store.StreamState, startTimeSeq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.mu.cfg
	first := max(st.FirstSeq, 1)
	switch cfg.DeliverPolicy {
	case api.DeliverAll:
		c.mu.sseq = first
	case api.DeliverNew:
		c.mu.sseq = st.LastSeq + 1
	case api.DeliverByStartSequence:
		c.mu.sseq = max(cfg.OptStartSeq, first)
	case api.DeliverByStartTime:
		c.mu.sseq = startTimeSeq
	case api.DeliverLast:
		c.mu.sseq = st.LastSeq + 1
		if last := c.lastMatching(); last > 0 {
			c.mu.sseq = last
		}
	case api.DeliverLastPerSubject:
		lps, err := c.lastPerSubject()
		if err != nil {
			return err
		}
		c.mu.lps = lps
		c.mu.sseq = st.LastSeq + 1
	}
	if c.mu.sseq > 0 {
		c.mu.delivered = c.mu.sseq - 1
		c.mu.ackS = c.mu.sseq - 1
	}
	if len(c.mu.lps) > 0 {
		// Floors sit just below the first message owed, as on nats-server.
		c.mu.delivered = c.mu.lps[0] - 1
		c.mu.ackS = c.mu.lps[0] - 1
	}
	c.setSSeqLocked(c.mu.sseq)
	return c.countPendingLocked()
}

// lastMatching is the newest committed message passing the filters.
func (c *consumer) lastMatching() uint64 {
	filters := c.mu.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var last uint64
	for _, f := range filters {
		if m, err := c.s.ap.st.LastMsg(c.s.id, f); err == nil && m.Seq > last {
			last = m.Seq
		}
	}
	return last
}

// lastPerSubject lists the newest message of every matching subject.
func (c *consumer) lastPerSubject() ([]uint64, error) {
	filters := c.mu.filters
	if len(filters) == 0 {
		filters = []string{">"}
	}
	seen := map[uint64]bool{}
	var out []uint64
	for _, f := range filters {
		err := c.s.ap.st.SubjectStates(c.s.id, f, func(ss store.SubjectState) error {
			if !seen[ss.Last] {
				seen[ss.Last] = true
				out = append(out, ss.Last)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// countPendingLocked computes num_pending from the store: matching
// messages at or after sseq, plus last-per-subject ones still owed.
func (c *consumer) countPendingLocked() error {
	n, err := c.s.countFrom(c.mu.filters, c.mu.sseq)
	if err != nil {
		return err
	}
	c.npend.Store(int64(n + uint64(len(c.mu.lps))))
	return nil
}

// countFrom counts the stream's messages at or after from on subjects
// matching filters (none: every subject), from the subject index: a
// consumer's num_pending, a batched direct get's Nats-Num-Pending.
// Filters must not overlap (consumer filters never do).
func (s *stream) countFrom(filters []string, from uint64) (uint64, error) {
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var n uint64
	for _, f := range filters {
		err := s.ap.st.SubjectStates(s.id, f, func(ss store.SubjectState) error {
			switch {
			case ss.Last < from:
			case ss.First >= from:
				n += ss.Msgs
			default:
				return s.ap.st.SubjectSeqs(s.id, ss.Subject, from, func(uint64) error { n++; return nil })
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// numPending is num_pending, never negative.
func (c *consumer) numPending() uint64 { return uint64(max(c.npend.Load(), 0)) }

// info snapshots the consumer for API replies.
func (c *consumer) info() *api.ConsumerInfo {
	first := c.s.snapshotState().FirstSeq // before c.mu: lock order
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	ci := &api.ConsumerInfo{
		Stream:         c.stream,
		Name:           c.name,
		Created:        c.created.UTC(),
		Config:         c.mu.cfg.WithServerMetadata(c.s.e.opts.ServerVersion, apiLevel),
		Delivered:      api.SequenceInfo{Consumer: c.mu.dseq, Stream: c.mu.delivered},
		AckFloor:       api.SequenceInfo{Consumer: c.mu.ackC, Stream: c.mu.ackS},
		NumAckPending:  len(c.mu.pending),
		NumRedelivered: c.numRedeliveredLocked(first),
		NumWaiting:     c.numWaitingLocked(),
		NumPending:     c.numPending(),
		TimeStamp:      now.UTC(),
		Cluster:        c.s.e.cl.clusterInfo(c.s.id),
	}
	if !c.mu.lastDel.IsZero() {
		t := c.mu.lastDel.UTC()
		ci.Delivered.Last = &t
	}
	if !c.mu.lastAck.IsZero() {
		t := c.mu.lastAck.UTC()
		ci.AckFloor.Last = &t
	}
	if cfg := c.mu.cfg; cfg.DeliverSubject != "" {
		ci.PushBound = c.a.acc.HasInterest(cfg.DeliverSubject)
	}
	ci.PriorityGroups = c.priorityGroupsLocked()
	if p := c.mu.cfg.PauseUntil; p != nil && p.After(now) {
		ci.Paused, ci.PauseRemaining = true, p.Sub(now)
	}
	return ci
}

// numWaitingLocked counts the pull requests whose requesters are still
// there, dropping the others first, as nats-server does before it
// reports.
func (c *consumer) numWaitingLocked() int {
	c.mu.waiting = slices.DeleteFunc(c.mu.waiting, func(r *pullRequest) bool { return !c.a.acc.HasInterest(r.reply) })
	return len(c.mu.waiting)
}

// numRedeliveredLocked is num_redelivered as nats-server counts it:
// outstanding deliveries made more than once, and messages still in the
// stream (first is its first sequence) that reached max_deliver.
func (c *consumer) numRedeliveredLocked(first uint64) int {
	c.mu.maxed = slices.DeleteFunc(c.mu.maxed, func(seq uint64) bool { return seq < first })
	n := len(c.mu.maxed)
	for _, p := range c.mu.pending {
		if p.dc > 1 {
			n++
		}
	}
	return n
}

// encodeStateLocked renders the state for the store.
func (c *consumer) encodeStateLocked() []byte {
	st := consumerState{DSeq: c.mu.dseq, SSeq: c.mu.sseq, Delivered: c.mu.delivered,
		AckC: c.mu.ackC, AckS: c.mu.ackS, Maxed: c.mu.maxed, LPS: c.mu.lps}
	for seq, p := range c.mu.pending {
		st.Pending = append(st.Pending, [4]uint64{seq, p.cseq, uint64(p.ts), p.dc})
	}
	sort.Slice(st.Pending, func(i, j int) bool { return st.Pending[i][0] < st.Pending[j][0] })
	b, _ := json.Marshal(&st)
	return b
}

// restoreState applies a persisted state at start-up; everything pending
// becomes due for redelivery after its ack wait.
func (c *consumer) restoreState(b []byte) error {
	var st consumerState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.dseq, c.mu.delivered = st.DSeq, st.Delivered
	c.setSSeqLocked(st.SSeq)
	c.mu.ackC, c.mu.ackS, c.mu.maxed, c.mu.lps = st.AckC, st.AckS, st.Maxed, st.LPS
	for _, p := range st.Pending {
		pm := &pendingMsg{cseq: p[1], ts: int64(p[2]), dc: p[3]}
		pm.due = pm.ts + int64(c.ackWaitLocked(pm.dc))
		c.addPendingLocked(p[0], pm)
	}
	return c.countPendingLocked()
}

// ackWaitLocked is how long a delivery may stay unacknowledged: the
// backoff step for its delivery count, else ack_wait. A flow_control
// consumer never redelivers (nats-server keeps no ack timer for it: the
// next flow control reply or a reset settles what is outstanding), so its
// wait is longer than any clock will run.
func (c *consumer) ackWaitLocked(dc uint64) time.Duration {
	cfg := c.mu.cfg
	if cfg.AckPolicy == api.AckFlowControl {
		return noRedelivery
	}
	if n := len(cfg.BackOff); n > 0 {
		i := int(dc) - 1
		if i < 0 {
			i = 0
		}
		return cfg.BackOff[min(i, n-1)]
	}
	if cfg.AckWait > 0 {
		return cfg.AckWait
	}
	return 30 * time.Second
}

// noRedelivery is the ack wait of a consumer that never redelivers: about
// 146 years, so a delivery time plus it still fits int64 nanoseconds.
const noRedelivery = time.Duration(1 << 62)

// ackSubject is the reply subject a delivery carries (v1 form).
func (c *consumer) ackSubject(dc, sseq, cseq uint64, ts int64, pending uint64) string {
	// The numbers are formatted on the stack and the string built in
	// one allocation: this runs once per message delivered.
	var num [5 * 21]byte
	b := strconv.AppendUint(num[:0], dc, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, sseq, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, cseq, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, pending, 10)
	var sb strings.Builder
	sb.Grow(len(c.ackPrefix) + len(b))
	sb.WriteString(c.ackPrefix)
	sb.Write(b)
	return sb.String()
}

// encodeState snapshots the state for the store and clears dirty.
func (c *consumer) encodeState() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.dirty, c.mu.persisting = false, false
	return c.encodeStateLocked()
}

func (c *consumer) isDeleted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.deleted
}

// purged moves the consumer past a purge, as nats-server moves its
// consumers: next is the first sequence still worth looking at (below it
// the purge left nothing this consumer sees). What it had outstanding
// below next is forgotten, its floors rise to just below next, and with
// nothing outstanding its ack floor meets what it delivered. all says
// the stream was emptied.
func (c *consumer) purged(next uint64, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recycleAheadLocked()
	c.mu.aheadTo = 0
	if all {
		c.mu.lps = nil
		c.npend.Store(0)
	} else {
		c.mu.lps = slices.DeleteFunc(c.mu.lps, func(seq uint64) bool {
			if seq < next {
				c.npend.Add(-1)
				return true
			}
			return false
		})
	}
	if c.mu.sseq < next {
		c.setSSeqLocked(next)
	}
	var gone []uint64
	for len(c.mu.order) > 0 && c.mu.order[0] < next {
		gone = append(gone, c.mu.order[0])
		c.delPendingLocked(c.mu.order[0])
	}
	c.dropFromRdqLocked(gone)
	if next > 0 {
		c.mu.delivered = max(c.mu.delivered, next-1)
		c.mu.ackS = max(c.mu.ackS, next-1)
	}
	c.advanceAckFloorLocked()
	c.mu.dirty = true
}

// msgRemoved forgets a delivery whose message left the stream (a delete,
// a limit, a purge) before it was acknowledged: it is terminated, with
// nats-server's advisory. Called with the stream's lock held.
func (c *consumer) msgRemoved(seq uint64) {
	c.mu.Lock()
	p := c.mu.pending[seq]
	if p == nil {
		c.mu.Unlock()
		return
	}
	c.delPendingLocked(seq)
	c.dropFromRdqLocked([]uint64{seq})
	c.mu.dirty = true
	c.advanceAckFloorLocked()
	c.mu.Unlock()
	c.wake()
	if a := c.a; a != nil {
		adv := map[string]any{"type": "io.nats.jetstream.advisory.v1.terminated",
			"consumer_seq": p.cseq, "stream_seq": seq, "deliveries": p.dc, "reason": "Unacknowledged message was deleted"}
		go a.consumerAdvisory("MSG_TERMINATED", c, adv)
	}
}

// hdrLeadershipChange tells a waiting pull request that the consumer
// moved to another node (its partition's leadership changed): the
// client pulls again, and its request reaches the new leader.
var hdrLeadershipChange = []byte("NATS/1.0 409 Leadership Change\r\n\r\n")

// leadershipLost answers the waiting pull requests of a consumer whose
// partition this node no longer leads, as nats-server's new consumer
// leader answers the requests its predecessor held: they would
// otherwise wait out their expiry on a node that no longer delivers.
func (c *consumer) leadershipLost() {
	c.mu.Lock()
	waiting := c.mu.waiting
	c.mu.waiting = nil
	c.mu.Unlock()
	for _, r := range waiting {
		c.a.acc.Publish(r.reply, "", hdrLeadershipChange, nil)
	}
}

// stop ends the delivery loop without removing the consumer (shutdown).
func (c *consumer) stop() {
	c.stopSubs()
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.stopped
	// Whatever changed since the last write goes through the apply path
	// before the appliers close.
	c.mu.Lock()
	persist := c.mu.dirty && c.s.keepsConsumer(c.mu.cfg) && !c.mu.deleted
	c.mu.Unlock()
	if persist {
		c.persist()
	}
}
