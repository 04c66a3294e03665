package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// stream is one JetStream stream: its config, its hot state in memory,
// and its messages in a store. Only the applier goroutine of its store
// changes it, under mu; API readers take mu for snapshots.
type stream struct {
	e       *Engine
	ap      *applier
	id      uint64
	created time.Time
	// ledger is the owning account's usage ledger; set before the stream
	// is first applied to, never changed.
	ledger *usageLedger
	// account names the owning account of a stream read from the store,
	// until it is handed to that account.
	account string

	mu struct {
		sync.Mutex
		cfg   *api.StreamConfig // guarded by mu
		tr    transforms        // cfg's compiled mappings; guarded by mu
		state store.StreamState // guarded by mu
		// Invariant: state.Msgs == 0 implies state.FirstSeq == state.LastSeq+1
		// (or both zero for a stream that never held a message).
		dedup     map[string]dedupRec      // Nats-Msg-Id → where it went; guarded by mu
		lastMsgID string                   // guarded by mu
		subjects  map[string]*subjectState // nil until first needed; guarded by mu
		build     *subjectBuild            // subjects being built, if so; guarded by mu
		removed   bool                     // guarded by mu
		dirty     bool                     // state changed since the applier recorded its summary; guarded by mu
		timer     *time.Timer              // expiry timer; guarded by mu
		timerAt   int64                    // when it fires (unix nanos), 0 if idle; guarded by mu
		nextTTL   int64                    // earliest per-message TTL expiry, 0 if none; guarded by mu
		// oldest is the stream's oldest message as removeLocked last read
		// it, so the eviction after reads only the one after it: a capped
		// stream evicts at every message, and reading each oldest message
		// twice (as the next one, then as the one to evict) was a third
		// of its apply step. Valid while oldest.seq == state.FirstSeq:
		// sequences are never reused and a message never changes. nil
		// until the stream first removes its oldest message, so a stream
		// that never does pays a word. Guarded by mu.
		oldest *oldestMsg
		// holeGen is the applier group (applier.gen) that last removed a
		// message other than the stream's oldest, 0 if none did; guarded
		// by mu. See committedLiveLocked.
		holeGen uint64
		// ageNext is the time of the oldest message max_age can remove, 0
		// when unknown; guarded by mu.
		ageNext int64
		// cons are the stream's consumers by name; guarded by mu.
		cons map[string]*consumer
		// dedupPruneAt is when old Nats-Msg-Id records are next dropped.
		dedupPruneAt int64 // guarded by mu
		// sched maps each schedule's subject to its message and next
		// time (schedule.go); schedNext caches the earliest, recomputed
		// when schedDirty. Guarded by mu.
		sched      map[string]schedEntry
		schedNext  int64
		schedDirty bool
		// schedOut holds stored copies waiting to be republished once
		// durable; guarded by mu.
		schedOut []schedCopy
		// owner is the account the stream was last attached to: what
		// the stream's own writes (schedule copies) are counted against
		// and published in. Guarded by mu.
		owner *jsAccount
		// detached is true while the stream is not attached to an enabled
		// account (recovered and not yet claimed, or held while its
		// account is disabled): no expiry timer runs.
		detached bool
		// parked holds durable consumers waiting for the stream to attach:
		// read at start-up, or kept while the account was disabled.
		parked []*consumer
		// progress is, per source index name, the last origin sequence
		// the stream took (source.go); written by the apply step that
		// stores the message, with it. Guarded by mu.
		progress map[string]sourceProgress
		// sourcers are the running mirror or source readers while the
		// stream is attached; guarded by mu.
		sourcers []*sourcer
		// cold is the stream's tiered part (cold.go); guarded by mu but
		// for its published segment list.
		cold coldState
		// restoring marks a restore's stream until it is filled (the
		// stream record carries it, storedStream.Restoring): one found
		// so on start-up or by a partition's new leader is what a
		// restore left half done, and is removed, never loaded.
		// Guarded by mu.
		restoring bool
	}
	unsubs []func() // capture subscriptions; owned by the account
	// batches holds the stream's open atomic batches (batch.go).
	batches openBatches
	// durable is the last sequence committed to the store: consumers
	// deliver nothing beyond it.
	durable atomic.Uint64
	// woken is the consumers wakeConsumers tells of new commits, a copy
	// of mu.cons's set as of its last change (consumersChangedLocked).
	// It is read without mu because the commit step calls
	// wakeConsumers while the apply step may hold mu waiting for that
	// commit step (applier.visible): taking mu there deadlocks once
	// more than one group is in flight, as on a replicated partition.
	woken atomic.Pointer[[]*consumer]
}

// loadConsumers reads the stream's kept consumers (keepsConsumer) from the
// store.
func (s *stream) loadConsumers(r *store.Recovery) error {
	return r.Consumers(s.id, func(rec store.ConsumerRecord) error {
		var cr consumerRecord
		if err := json.Unmarshal(rec.Config, &cr); err != nil || cr.Config == nil {
			return fmt.Errorf("jetstream: consumer %q record: %w", rec.Name, errors.Join(err, store.ErrCorrupt))
		}
		c := newConsumer(s, nil, rec.Name, cr.Config, cr.Created)
		if len(rec.State) > 0 {
			if err := c.restoreState(rec.State); err != nil {
				return fmt.Errorf("jetstream: consumer %q state: %w", rec.Name, errors.Join(err, store.ErrCorrupt))
			}
		}
		s.mu.parked = append(s.mu.parked, c)
		return nil
	})
}

type dedupRec struct {
	seq uint64
	ts  int64
}

type subjectState struct {
	msgs        uint64
	first, last uint64
}

func newStream(e *Engine, ap *applier, id uint64, cfg *api.StreamConfig, created time.Time) *stream {
	s := &stream{e: e, ap: ap, id: id, created: created}
	s.mu.cfg = cfg
	s.mu.tr, _ = compileTransforms(cfg)
	s.mu.dedup = map[string]dedupRec{}
	s.mu.cons = map[string]*consumer{}
	s.mu.progress = map[string]sourceProgress{}
	return s
}

// name is the stream's name; it never changes.
func (s *stream) name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cfg.Name
}

func (s *stream) config() *api.StreamConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cfg
}

// record is the stream's catalog record.
func (s *stream) recordLocked(account string) store.StreamMeta {
	b, _ := json.Marshal(storedStream{Account: account, Config: s.mu.cfg, Created: s.created, Restoring: s.mu.restoring})
	return store.StreamMeta{ID: s.id, Name: s.mu.cfg.Name, Config: b}
}

// loadDedup restores the duplicate window at start-up.
func (s *stream) loadDedup(r *store.Recovery, now time.Time) error {
	window := s.mu.cfg.Duplicates
	if window <= 0 {
		return nil
	}
	return r.DedupSince(s.id, now.Add(-window).UnixNano(), func(d store.DedupEntry) error {
		s.mu.dedup[d.ID] = dedupRec{seq: d.Seq, ts: d.Time}
		return nil
	})
}

// loadNextTTL restores, at start-up, when the earliest Nats-TTL is due,
// so the expiry timer armed when the stream attaches covers messages
// stored before the restart.
func (s *stream) loadNextTTL(r *store.Recovery) error {
	stop := errors.New("stop")
	err := r.Expiring(s.id, math.MaxInt64, func(_ uint64, expires int64) error {
		s.mu.nextTTL = expires
		return stop
	})
	if err != nil && !errors.Is(err, stop) {
		return fmt.Errorf("jetstream: stream %q TTL index: %w", s.mu.cfg.Name, err)
	}
	return nil
}

// msgSize is what a message counts against byte limits.
func msgSize(subject string, hdr, data []byte) uint64 {
	return uint64(len(subject) + len(hdr) + len(data) + 16)
}

// info snapshots the stream for API replies. Its cost does not grow with
// the stream: the counts come from the state in memory, num_subjects from
// the per-subject summaries; only subject and deleted details, when asked
// for, read the store.
func (s *stream) info(req *api.StreamInfoRequest) (*api.StreamInfo, *api.Error) {
	s.mu.Lock()
	cfg := s.mu.cfg
	st := s.mu.state
	nc := len(s.mu.cons)
	s.mu.Unlock()
	si := &api.StreamInfo{
		Config:    *cfg.WithServerMetadata(s.e.opts.ServerVersion, apiLevel),
		Created:   s.created.UTC(),
		State:     stateOf(st),
		Domain:    s.e.opts.Domain,
		TimeStamp: s.e.opts.Now().UTC(),
	}
	si.State.Consumers = nc
	si.Cluster = s.e.cl.clusterInfo(s.id)
	if cfg.Mirror != nil || len(cfg.Sources) > 0 {
		infos := s.sourceInfos()
		if cfg.Mirror != nil && len(infos) > 0 {
			si.Mirror = infos[0]
		} else if cfg.Mirror == nil {
			si.Sources = infos
		}
	}
	if req != nil && req.DeletedDetails && si.State.NumDeleted > 0 {
		del, err := s.deletedSeqs(st)
		if err != nil {
			return nil, api.NewStreamGeneralError(err)
		}
		si.State.Deleted = del
	}
	if req != nil && req.SubjectsFilter != "" && st.Msgs > 0 {
		subs := map[string]uint64{}
		err := s.ap.st.SubjectStates(s.id, req.SubjectsFilter, func(ss store.SubjectState) error {
			subs[ss.Subject] = ss.Msgs
			return nil
		})
		if err != nil {
			return nil, api.NewStreamGeneralError(err)
		}
		if len(subs) > 0 {
			si.State.Subjects = subs
		}
	}
	if st.Msgs > 0 {
		n, err := s.numSubjects()
		if err != nil {
			return nil, api.Prefer(err, api.NewStreamGeneralError(err))
		}
		si.State.NumSubjects = n
	}
	return si, nil
}

// numSubjects counts the stream's subjects from its per-subject
// summaries. A stream that keeps none yet (no per-subject limit, no
// STREAM.INFO since it was loaded) has them built once, by its applier
// from the subject index in bounded steps, and maintained by every write
// from then on: the one walk is paid once, not by every request, and never
// holds up other streams for long. The summaries cost memory per subject,
// as nats-server's per-subject index does.
func (s *stream) numSubjects() (int, error) {
	for {
		s.mu.Lock()
		n, known := len(s.mu.subjects), s.mu.subjects != nil
		s.mu.Unlock()
		if known {
			return n, nil
		}
		if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil {
			return 0, r.err
		}
	}
}

func stateOf(st store.StreamState) api.StreamState {
	out := api.StreamState{
		Msgs:     st.Msgs,
		Bytes:    st.Bytes,
		FirstSeq: st.FirstSeq,
		LastSeq:  st.LastSeq,
	}
	if st.FirstTime != 0 {
		out.FirstTime = time.Unix(0, st.FirstTime).UTC()
	}
	if st.LastTime != 0 {
		out.LastTime = time.Unix(0, st.LastTime).UTC()
	}
	if st.Msgs > 0 {
		out.NumDeleted = int(st.LastSeq - st.FirstSeq + 1 - st.Msgs)
	}
	return out
}

// deletedSeqs lists the sequences between first and last that hold no
// message. It reads message keys only as far as the last gap: the count
// of gaps is known from the state.
func (s *stream) deletedSeqs(st store.StreamState) ([]uint64, error) {
	want := st.LastSeq - st.FirstSeq + 1 - st.Msgs
	out := make([]uint64, 0, min(want, 1<<16))
	next := st.FirstSeq
	err := s.ap.st.MsgSeqs(s.id, st.FirstSeq, st.LastSeq+1, func(seq uint64) bool {
		for ; next < seq; next++ {
			out = append(out, next)
		}
		next = seq + 1
		return uint64(len(out)) < want
	})
	if err != nil {
		return nil, err
	}
	if uint64(len(out)) < want {
		// Messages removed after the last one still held are gaps too:
		// last_seq stays where it was.
		for ; next <= st.LastSeq; next++ {
			out = append(out, next)
		}
	}
	return out, nil
}

// apiLevel is the JetStream API level Contrail reports (ADR-44): the
// level of server.Version, whose features all work here.
const apiLevel = 2

// errStreamGone is returned for work on a stream deleted meanwhile.
var errStreamGone = api.NewStreamNotFoundError()

func (s *stream) String() string { return fmt.Sprintf("stream %d", s.id) }

// snapshotState returns the stream's state summary.
func (s *stream) snapshotState() store.StreamState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.state
}

// firstAtOrAfter finds the first committed message stored at or after t
// (unix nanos), or the next sequence to be assigned if there is none: a
// binary search over the stream's sequences, not a scan.
func (s *stream) firstAtOrAfter(t int64) (uint64, error) {
	st := s.snapshotState()
	if st.Msgs == 0 || t > st.LastTime {
		return st.LastSeq + 1, nil
	}
	seq, ok, err := s.ap.st.SeqAtTime(s.id, st.FirstSeq, st.LastSeq, t)
	if err != nil || !ok {
		return st.LastSeq + 1, err
	}
	return seq, nil
}

// consumersLocked lists the stream's consumers.
func (s *stream) consumersLocked() []*consumer {
	out := make([]*consumer, 0, len(s.mu.cons))
	for _, c := range s.mu.cons {
		out = append(out, c)
	}
	return out
}

// consumersChangedLocked records mu.cons's set for wakeConsumers; call
// it after every change of mu.cons.
func (s *stream) consumersChangedLocked() {
	list := s.consumersLocked()
	s.woken.Store(&list)
}

// wakeConsumers tells every consumer new messages are committed. It
// never takes the stream's lock (see woken).
func (s *stream) wakeConsumers() {
	list := s.woken.Load()
	if list == nil {
		return
	}
	for _, c := range *list {
		c.wake()
	}
}

// acked hands sequences a consumer acknowledged to the apply path, which
// removes them if the stream's retention says they are done; then, if
// set, runs once that is applied (a double ack's reply: the client then
// sees the message gone, as on nats-server).
func (s *stream) acked(a *jsAccount, seqs []uint64, then func()) {
	cfg := s.config()
	if cfg.Retention == api.LimitsPolicy {
		if then != nil {
			then()
		}
		return
	}
	done := func(*proposal, result) {}
	if then != nil {
		done = thenIfDurable(then)
	}
	// seqs may be the caller's scratch (onAck's): the proposal keeps a copy.
	s.ap.submit(&proposal{s: s, acct: a, kind: propAcked, seqs: slices.Clone(seqs), done: done})
}

// markDurable records that everything up to seq is on stable storage and
// lets the consumers deliver it.
func (s *stream) markDurable(seq uint64) {
	for {
		cur := s.durable.Load()
		if seq <= cur || s.durable.CompareAndSwap(cur, seq) {
			break
		}
	}
	s.wakeConsumers()
}

// oldestMsg is what removing a stream's oldest message needs of it.
type oldestMsg struct {
	seq, size uint64
	subject   string
}
