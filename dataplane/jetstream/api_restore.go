package jetstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/jetstream/archive"
	"github.com/contrail/contrail/dataplane/subject"
)

func init() {
	apiRoutes["STREAM.RESTORE"] = apiRoute{(*jsAccount).streamRestore, restoreFail}
}

// restoreFail is STREAM.RESTORE's error reply.
func restoreFail(err *api.Error) any {
	return &api.StreamRestoreResponse{Response: api.Response{Type: api.TypeStreamRestoreResponse, Error: err}}
}

// restoreStall is how long a restore waits for the client's next chunk
// before it gives up, as nats-server's.
var restoreStall = 5 * time.Second

// Restored messages in flight at once (submitted, not yet durable): the
// apply path shares each commit among many of them, and the bounds keep
// a restore's memory small whatever the backup holds.
const (
	restoreInflightMsgs  = 256
	restoreInflightBytes = 8 << 20
)

// errSeqOrder is a message that keeps its origin's sequence
// (proposal.keptOrigin) at or below the stream's last sequence: a backup
// not in order, or a stream that took a message that did not come from
// its origin.
var errSeqOrder = errors.New("message out of sequence order")

// keptOrigin is the sequence and time a message keeps from where it
// came, a mirror's origin or a restored backup; kept is false for one
// the stream numbers and stamps itself.
func (p *proposal) keptOrigin() (seq uint64, ts int64, kept bool) {
	switch {
	case p.rst != nil:
		return p.rst.seq, p.rst.ts, true
	case p.src != nil && p.src.mirror:
		return p.src.oseq, p.src.ts, true
	}
	return 0, 0, false
}

// restoredMsg is the sequence and time a restored message comes back
// with (proposal.rst); on the end of a restore, the backup's last
// sequence and time, and its sources' progress.
type restoredMsg struct {
	seq     uint64
	ts      int64
	sources []archive.Source
}

// streamRestore answers STREAM.RESTORE: it checks the config as a
// create's, makes the stream, and answers with the subject to send the
// backup (package archive) to, in chunks, each a request answered once
// it is taken. An empty chunk ends the backup; its answer is the
// stream's create response, or the restore's error.
//
// The stream stays pending while it fills (as a stream being created
// is): it captures no subjects, no request finds it, and a create of its
// name is refused, so nothing but the backup lands in it. Messages keep
// their sequences and times and go through the one apply path, as
// restored messages (storeMsgLocked); the consumers follow the
// messages, with their delivery state. Only then is the stream attached.
// A restore that fails removes everything it wrote, in one committed
// removal, as a stream delete does.
func (a *jsAccount) streamRestore(req apiRequest, name string) any {
	cfg, aerr := a.restoreConfig(req.body, name)
	if aerr != nil {
		return restoreFail(aerr)
	}
	if req.asg != nil {
		a.mu.Lock()
		again := a.mu.streams.holds(name, req.asg.ID)
		a.mu.Unlock()
		if again {
			// The same committed request served a second time (seen
			// around a partition's hand-over, with the balancer moving
			// leaderships): the first serve answers it, and a 10130
			// from here could reach the client first. A restore, unlike
			// a create, is not answered alike when repeated.
			return nil
		}
	}
	if a.lookup(name) != nil {
		return restoreFail(api.NewStreamNameExistRestoreFailedError())
	}
	// On a cluster the catalog has placed the stream already (metaServe):
	// a refusal that leaves no stream of its id here has it forgotten
	// again, or the catalog would list a stream nobody holds. One whose
	// name is taken (10130) leaves the catalog alone: the stream there
	// is real (made by a create, or by this very restore, run again).
	refuse := func(aerr *api.Error) any {
		// Nor one whose create never reached the log, or may have: the
		// partition's next leader runs the request again (keepEntry), or
		// finds the stream it began and has it forgotten (take).
		if req.asg != nil && aerr.ErrCode != api.CodeStreamNameExistRestoreFailed && !isNotAppended(aerr) && !isFateUnknown(aerr) {
			a.e.cl.forgetRestore(a.acc.Name(), name, req.asg.ID)
		}
		return restoreFail(aerr)
	}
	release, err := a.e.xfer.begin(a)
	if err != nil {
		return refuse(api.NewStreamRestoreError(err))
	}
	s, aerr := a.reserveRestore(cfg, req.asg)
	if aerr != nil {
		release()
		return refuse(aerr)
	}
	rs := newRestore(a, s, release)
	unsub, err := a.acc.SubscribeInternal(rs.subject, rs.onChunk)
	if err != nil {
		rs.abandon(err)
		release()
		return restoreFail(api.NewRestoreSubscribeFailedError(rs.subject, err))
	}
	rs.unsub = unsub
	a.e.log.Info("jetstream stream restore started", "account", a.acc.Name(), "stream", name)
	a.reply(req.reply, &api.StreamRestoreResponse{Response: api.Response{Type: api.TypeStreamRestoreResponse},
		DeliverSubject: rs.subject})
	go rs.run(a.e.xfer.ctx)
	return nil
}

// restoreConfig decodes and checks a restore request's config, as a
// create's (checkStreamConfig): the name in the subject rules, and a
// config without one takes it. An empty request is a bad one (10003),
// as on nats-server.
func (a *jsAccount) restoreConfig(body []byte, name string) (*api.StreamConfig, *api.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, api.NewBadRequestError()
	}
	var rreq api.StreamRestoreRequest
	if err := api.DecodeRequest(body, &rreq); err != nil {
		return nil, api.NewInvalidJSONError(err)
	}
	if rreq.Config.Name == "" {
		rreq.Config.Name = name
	}
	if rreq.Config.Name != name {
		return nil, api.NewStreamNameMismatchError()
	}
	return a.checkStreamConfig(&api.StreamConfigRequest{StreamConfig: rreq.Config}, name, true, true)
}

// reserveRestore files the stream a restore fills as pending and commits
// its create: the name is taken, the stream is not attached.
func (a *jsAccount) reserveRestore(cfg *api.StreamConfig, asg *assignment) (*stream, *api.Error) {
	s, fresh, wait, aerr := a.reserveStream(cfg, asg)
	switch {
	case aerr != nil:
		if aerr.ErrCode == api.CodeStreamNameInUse {
			return nil, api.NewStreamNameExistRestoreFailedError()
		}
		return nil, aerr
	case wait != nil || !fresh:
		// Being created or restored, or made meanwhile.
		return nil, api.NewStreamNameExistRestoreFailedError()
	}
	s.mu.Lock()
	s.mu.restoring = true // in the record the create writes
	s.mu.Unlock()
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propCreate}); r.err != nil {
		return nil, a.finishCreate(s, r)
	}
	return s, nil
}

// restore is one STREAM.RESTORE in progress.
type restore struct {
	a       *jsAccount
	s       *stream
	subject string
	release func()
	unsub   func()
	// chunks carries the client's chunks to run; the client sends one
	// and waits for its answer, so one is queued at a time.
	chunks chan restoreChunk
	// ended is closed once run stops taking chunks: a chunk arriving
	// after it is answered with the restore's outcome, err.
	ended chan struct{}
	mu    struct {
		sync.Mutex
		err error
	}
}

// restoreChunk is one chunk of a backup and the subject its answer goes
// to; an empty one ends the backup.
type restoreChunk struct {
	data  []byte
	reply string
}

func newRestore(a *jsAccount, s *stream, release func()) *restore {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &restore{a: a, s: s, release: release,
		subject: "$JS.SNAPSHOT.RESTORE." + s.name() + "." + hex.EncodeToString(id[:]),
		chunks:  make(chan restoreChunk, 1), ended: make(chan struct{})}
}

// onChunk takes one chunk from the client (a subscription handler: it
// does not block). A chunk without a reply subject cannot be answered,
// and ends the restore, as on nats-server.
func (rs *restore) onChunk(_, reply, _, msg []byte) {
	select {
	case <-rs.ended:
		rs.answer(string(reply), rs.outcome())
		return
	default:
	}
	c := restoreChunk{data: bytes.Clone(msg), reply: string(reply)}
	if len(reply) == 0 {
		rs.fail(errors.New("a chunk came without a reply subject"))
		c.data = nil // ends the backup: run stops with the failure
	}
	select {
	case rs.chunks <- c:
		select {
		case <-rs.ended:
			// run ended while this went in, and may have looked for
			// chunks to answer before it did.
			select {
			case c := <-rs.chunks:
				rs.answer(c.reply, rs.outcome())
			default:
			}
		default:
		}
	default:
		rs.fail(errors.New("a chunk came before the one before it was answered"))
		rs.answer(c.reply, rs.outcome())
	}
}

// fail records the restore's first error.
func (rs *restore) fail(err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.mu.err == nil {
		rs.mu.err = err
	}
}

func (rs *restore) outcome() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.mu.err
}

// answer answers a chunk: empty when it was taken, the create response's
// error shape when the restore failed.
func (rs *restore) answer(reply string, err error) {
	if err == nil {
		rs.send(reply, nil)
		return
	}
	rs.send(reply, streamErr(api.TypeStreamCreateResponse, api.Prefer(err, api.NewStreamRestoreError(err))))
}

// send publishes v (nil: an empty message) to a chunk's reply subject.
// Chunk answers are not API requests' answers: the API stats count the
// STREAM.RESTORE request once, as nats-server's do.
func (rs *restore) send(reply string, v any) {
	if reply == "" {
		return
	}
	var b []byte
	if v != nil {
		var err error
		if b, err = json.Marshal(v); err != nil {
			rs.a.e.log.Error("jetstream restore answer", "err", err)
			return
		}
	}
	rs.a.acc.Publish(reply, "", nil, b)
}

// run reads the backup, fills the stream and attaches it, then answers
// the final chunk; on any failure it removes the stream and answers with
// the error.
func (rs *restore) run(ctx context.Context) {
	start := time.Now()
	cr := &chunkReader{rs: rs, ctx: ctx}
	err := rs.fill(ctx, cr)
	if err == nil {
		err = rs.outcome()
	}
	if err == nil {
		// The rest of the input must be the empty chunk that ends it.
		if _, rerr := cr.Read(make([]byte, 1)); rerr != io.EOF {
			err = fmt.Errorf("data after the backup's end: %w", rerr)
		}
	}
	var resp any
	if err == nil {
		resp, err = rs.finish()
	}
	rs.fail(err)
	rs.unsub()
	close(rs.ended)
	a, name := rs.a, rs.s.name()
	if err != nil {
		rs.abandon(err)
	}
	// Settled before anyone hears the outcome: a client told the restore
	// failed may restore the name again at once, and one told it is done
	// may start the next.
	rs.release()
	// Answer what waits: the chunk the failure left unanswered, the
	// final one, any sent meanwhile (the client stops sending once it
	// hears an error).
	if cr.cur.reply != "" {
		rs.answer(cr.cur.reply, err)
	}
	for drained := false; !drained; {
		select {
		case c := <-rs.chunks:
			rs.answer(c.reply, err)
		default:
			drained = true
		}
	}
	if err != nil {
		if cr.final != "" {
			rs.answer(cr.final, err)
		}
		a.e.log.Warn("jetstream stream restore failed", "account", a.acc.Name(), "stream", name, "err", err)
		return
	}
	rs.send(cr.final, resp)
	a.e.log.Info("jetstream stream restored", "account", a.acc.Name(), "stream", name,
		"bytes", cr.total, "took", time.Since(start).Round(time.Millisecond))
}

// fill reads the archive into the stream: its position, its messages,
// where its sequences end, then its consumers (kept aside in parked,
// started when the stream is attached).
func (rs *restore) fill(ctx context.Context, cr *chunkReader) error {
	ar, err := archive.NewReader(cr)
	if err != nil {
		if errors.Is(err, archive.ErrFormat) {
			return fmt.Errorf("%w (a nats-server backup holds that server's store files: restore it there, or copy a stream across with a mirror or source)", err)
		}
		return err
	}
	hdr, err := ar.Stream()
	if err != nil {
		return err
	}
	if hdr.State.LastSeq > api.MaxRequestSeq || hdr.State.FirstSeq > hdr.State.LastSeq+1 {
		return fmt.Errorf("%w: stream sequences %d to %d", archive.ErrCorrupt, hdr.State.FirstSeq, hdr.State.LastSeq)
	}
	s, a := rs.s, rs.a
	// Start where the backup's stream started: the next sequence is its
	// first message's (or, with none, the one after its last).
	first := hdr.State.FirstSeq
	if hdr.State.Msgs == 0 {
		first = hdr.State.LastSeq + 1
	}
	if first > s.snapshotState().LastSeq+1 {
		if r := s.ap.apply(&proposal{s: s, acct: a, kind: propPurge, purge: api.StreamPurgeRequest{Sequence: first}}); r.err != nil {
			return r.err
		}
	}
	// Nothing returns with messages still in flight: their outcomes
	// are part of the restore's.
	fl := newInflight()
	defer fl.wait()
	var cons []*archive.Consumer
	for {
		rec, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch v := rec.(type) {
		case *archive.Msg:
			if err := rs.outcome(); err != nil {
				return err
			}
			if err := checkRestored(v, hdr.State.LastSeq); err != nil {
				return err
			}
			p := &proposal{s: s, acct: a, kind: propMsg, subject: v.Subject, hdr: bytes.Clone(v.Header),
				data: bytes.Clone(v.Data), rst: &restoredMsg{seq: v.Seq, ts: v.Time}}
			if p.data == nil {
				p.data = []byte{}
			}
			size := len(p.subject) + len(p.hdr) + len(p.data)
			fl.take(size)
			p.done = func(_ *proposal, r result) {
				if r.err != nil {
					rs.fail(fmt.Errorf("message %d: %w", v.Seq, r.err))
				}
				fl.give(size)
			}
			if !s.ap.submit(p) {
				p.done(p, s.ap.closedResult())
			}
		case *archive.Consumer:
			cons = append(cons, v)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fl.wait()
	if err := rs.outcome(); err != nil {
		return err
	}
	end := &restoredMsg{seq: hdr.State.LastSeq, ts: hdr.State.LastTime, sources: hdr.Sources}
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propRestoreEnd, rst: end}); r.err != nil {
		return r.err
	}
	for _, ac := range cons {
		c, err := rs.consumer(ac)
		if err != nil {
			return fmt.Errorf("consumer %q: %w", ac.Name, err)
		}
		if r := s.ap.apply(&proposal{s: s, acct: a, kind: propConsumerCreate, cons: c}); r.err != nil {
			return fmt.Errorf("consumer %q: %w", ac.Name, r.err)
		}
		s.mu.Lock()
		s.mu.parked = append(s.mu.parked, c)
		s.mu.Unlock()
	}
	return nil
}

// checkRestored refuses a message no publish could have stored: what a
// stream delivers must not be able to break its receivers' protocol
// (a subject with spaces or line ends would), whoever wrote the backup.
func checkRestored(m *archive.Msg, last uint64) error {
	switch {
	case m.Seq == 0 || m.Seq > last:
		return fmt.Errorf("%w: message %d outside the stream's sequences (to %d)", archive.ErrCorrupt, m.Seq, last)
	case !subject.ValidLiteralString(m.Subject):
		return fmt.Errorf("%w: message %d: invalid subject %q", archive.ErrCorrupt, m.Seq, m.Subject)
	case len(m.Header) > 0 && (!bytes.HasPrefix(m.Header, []byte("NATS/1.0")) || !bytes.HasSuffix(m.Header, []byte("\r\n\r\n"))):
		return fmt.Errorf("%w: message %d: invalid header block", archive.ErrCorrupt, m.Seq)
	}
	return nil
}

// consumer makes one of the backup's consumers again, checked as a
// create's config is, with its delivery state.
func (rs *restore) consumer(ac *archive.Consumer) (*consumer, error) {
	s, a := rs.s, rs.a
	var cfg api.ConsumerConfig
	if err := api.DecodeRequest(ac.Config, &cfg); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = ac.Name
	}
	if cfg.Name != ac.Name || api.HasPathSeparator(ac.Name) || !cfg.IsDurable() {
		return nil, errors.New("not a durable consumer of that name")
	}
	scfg := s.config()
	tierLim, aerr := a.consumerLimits(scfg.Replicas)
	if aerr != nil {
		return nil, aerr
	}
	norm, aerr := cfg.Normalize(api.ConsumerEnv{Stream: scfg, Limits: tierLim})
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	_, dup := s.mu.cons[ac.Name]
	for _, p := range s.mu.parked {
		dup = dup || p.name == ac.Name
	}
	have := len(s.mu.cons) + len(s.mu.parked)
	s.mu.Unlock()
	if dup {
		return nil, errors.New("the backup holds it twice")
	}
	if maxc := maxConsumers(scfg, tierLim); maxc > 0 && have >= maxc {
		return nil, api.NewMaxConsumersReachedError()
	}
	created := ac.Created
	if created.IsZero() {
		created = a.e.opts.Now().UTC()
	}
	c := newConsumer(s, a, ac.Name, norm, created)
	if len(ac.State) > 0 {
		if err := c.restoreState(ac.State); err != nil {
			return nil, fmt.Errorf("delivery state: %w", err)
		}
	} else if err := c.position(s.snapshotState(), 0); err != nil {
		return nil, err
	}
	return c, nil
}

// finish attaches the filled stream (its consumers start with it) and
// returns the create response the client gets.
func (rs *restore) finish() (any, error) {
	s, a := rs.s, rs.a
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propRestoreDone}); r.err != nil {
		return nil, r.err
	}
	if aerr := a.finishCreate(s, result{}); aerr != nil {
		return nil, aerr
	}
	info, _ := s.info(nil)
	return &api.StreamCreateResponse{Response: api.Response{Type: api.TypeStreamCreateResponse}, StreamInfo: info, DidCreate: true}, nil
}

// abandon removes a restore's stream, still pending, with everything it
// wrote, and gives its reservations back.
func (rs *restore) abandon(cause error) {
	s, a := rs.s, rs.a
	// The consumers made so far never started (they start with the
	// stream's attach): dropped, and their records go with the stream's.
	s.mu.Lock()
	s.mu.parked = nil
	s.mu.Unlock()
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propRemove}); r.err != nil {
		// Not removed here (the applier stopped, or the partition moved
		// on): its commitment goes back all the same.
		s.mu.Lock()
		s.commitLocked(-1)
		s.mu.Unlock()
		a.e.log.Warn("jetstream restored stream not removed", "account", a.acc.Name(), "stream", s.name(),
			"cause", cause, "err", r.err)
	}
	a.create.Lock()
	a.forget(s)
	a.e.untrack(s)
	a.create.Unlock()
	if a.e.cl != nil {
		a.e.cl.forgetRestore(a.acc.Name(), s.name(), s.id)
	}
}

// splitUnfinished separates, from streams just read from a store, those
// a restore left half filled (restoring): a kill, or the partition's
// leadership moving, ended the restore that made them, and its client
// was told it failed or heard nothing. Loaded, such a stream would pass
// for the stream the backup held.
func splitUnfinished(streams []*stream) (kept, unfinished []*stream) {
	kept = streams[:0:0]
	for _, s := range streams {
		s.mu.Lock()
		restoring := s.mu.restoring
		s.mu.Unlock()
		if restoring {
			unfinished = append(unfinished, s)
		} else {
			kept = append(kept, s)
		}
	}
	return kept, unfinished
}

// dropUnfinished removes streams a restore left half filled
// (splitUnfinished), each in one committed removal through its applier,
// which must run, as a failed restore removes its own. On a cluster the
// catalog forgets them too (forgetRestore), once the cluster runs.
func (e *Engine) dropUnfinished(streams []*stream) {
	for _, s := range streams {
		name := s.config().Name
		r := s.ap.apply(&proposal{s: s, kind: propRemove})
		e.log.Warn("jetstream: removed a stream whose restore did not finish", "account", s.account, "stream", name, "id", s.id, "err", r.err)
		if e.cl != nil {
			e.cl.forgetRestore(s.account, name, s.id)
		}
	}
}

// forgetRetry is how often forgetRestore asks again.
const forgetRetry = time.Second

// forgetRestore has the catalog forget stream id, which a restore made
// and never finished, and asks again (abandonCatalog) until the catalog
// here has applied its create and no longer lists it: the stream's node
// may drop it before a meta leader is known or its account is registered
// here, and a delete sent then is lost. Before the cluster starts
// (StartCluster) it is only noted; StartCluster asks.
func (c *clusterState) forgetRestore(account, name string, id uint64) {
	c.mu.Lock()
	if c.r == nil {
		c.mu.forget = append(c.mu.forget, &assignment{Account: account, Name: name, ID: id})
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(forgetRetry)
		defer t.Stop()
		for {
			// A catalog that has not applied the stream's create yet
			// (its group's last id is below it) would list it later.
			applied := id <= c.catalog.lastID(groupOf(id))
			if cur := c.catalog.lookup(account, name); applied && (cur == nil || cur.ID != id) {
				return
			}
			if a := c.e.account(account); a != nil {
				a.abandonCatalog(name, id)
			} else {
				c.needAccount(account, nil)
			}
			select {
			case <-c.quit:
				return
			case <-t.C:
			}
		}
	}()
}

// hdrAbandon, on a STREAM.DELETE the engine sends itself, names the
// stream (by id) that a failed restore made: the meta leader deletes the
// catalog's stream of that name only if it is still that one, never a
// stream made again since under the same name.
const hdrAbandon = "Contrail-Restore-Abandon"

// abandonCatalog has the meta leader forget stream id, which a failed
// restore made (or was to make) on a cluster, through the stream delete
// path every node runs: the catalog assigned it before its node began
// filling it.
func (a *jsAccount) abandonCatalog(name string, id uint64) {
	hdr := appendHeaderBlock(nil, "", hdrAbandon, strconv.FormatUint(id, 10))
	a.acc.Publish("$JS.API.STREAM.DELETE."+name, "", hdr, nil)
}

// abandonedIs reports whether a stream delete may delete have: any
// client's may; the engine's own, after a failed restore, only the
// stream that restore made.
func abandonedIs(hdr []byte, have *assignment) bool {
	v := headerValue(hdr, hdrAbandon)
	return len(v) == 0 || string(v) == strconv.FormatUint(have.ID, 10)
}

// chunkReader reads a restore's chunks as one stream of bytes, answering
// each chunk once it is read through: the client's next chunk waits for
// that answer, which keeps the restore's input paced by how fast it is
// applied.
type chunkReader struct {
	rs    *restore
	ctx   context.Context
	cur   restoreChunk // the chunk being read; data is what is left of it
	final string       // the reply of the empty chunk that ended the input
	total int
	eof   bool
	timer *time.Timer
}

func (cr *chunkReader) Read(p []byte) (int, error) {
	for len(cr.cur.data) == 0 {
		if cr.cur.reply != "" {
			cr.rs.answer(cr.cur.reply, nil)
			cr.cur.reply = ""
		}
		if cr.eof {
			return 0, io.EOF
		}
		if cr.timer == nil {
			cr.timer = time.NewTimer(restoreStall)
		} else {
			cr.timer.Reset(restoreStall)
		}
		select {
		case c := <-cr.rs.chunks:
			cr.timer.Stop()
			if len(c.data) == 0 {
				cr.eof, cr.final = true, c.reply
				if err := cr.rs.outcome(); err != nil {
					return 0, err
				}
				return 0, io.EOF
			}
			cr.cur = c
			cr.total += len(c.data)
		case <-cr.timer.C:
			return 0, fmt.Errorf("stalled: no chunk for %v", restoreStall)
		case <-cr.ctx.Done():
			return 0, cr.ctx.Err()
		}
	}
	n := copy(p, cr.cur.data)
	cr.cur.data = cr.cur.data[n:]
	return n, nil
}

// inflight bounds a restore's messages submitted and not yet durable,
// by count and by bytes (at least one message, however big).
type inflight struct {
	mu          sync.Mutex
	cond        *sync.Cond
	msgs, bytes int
}

func newInflight() *inflight {
	f := &inflight{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) take(size int) {
	f.mu.Lock()
	for f.msgs > 0 && (f.msgs >= restoreInflightMsgs || f.bytes+size > restoreInflightBytes) {
		f.cond.Wait()
	}
	f.msgs++
	f.bytes += size
	f.mu.Unlock()
}

func (f *inflight) give(size int) {
	f.mu.Lock()
	f.msgs--
	f.bytes -= size
	f.mu.Unlock()
	f.cond.Broadcast()
}

// wait returns once nothing is in flight.
func (f *inflight) wait() {
	f.mu.Lock()
	for f.msgs > 0 {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

// restoreEndLocked ends a restore's messages. The stream's last sequence
// moves to the backup's when the backup's last messages had been
// deleted: the next message gets the sequence after it, as it would have
// on the stream backed up. Each of the stream's sources goes on from
// where the backup had taken it.
func (s *stream) restoreEndLocked(end *restoredMsg, ap *applier) {
	st := &s.mu.state
	if end.seq > st.LastSeq {
		if st.Msgs > 0 {
			st.Deleted += end.seq - st.LastSeq
		} else {
			st.FirstSeq, st.FirstTime = end.seq+1, 0
		}
		st.LastSeq, st.LastTime = end.seq, end.ts
		s.mu.dirty = true
	}
	have := map[string]bool{}
	if m := s.mu.cfg.Mirror; m != nil {
		have[m.IndexName()] = true
	}
	for _, src := range s.mu.cfg.Sources {
		have[src.IndexName()] = true
	}
	for _, src := range end.sources {
		if !have[src.Key] {
			continue // not a source of the stream as restored
		}
		s.mu.progress[src.Key] = sourceProgress{seq: src.Seq, ident: src.Identity}
		ap.batch.PutSourceProgress(s.id, src.Key, src.Seq, src.Identity)
	}
}
