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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/jetstream/archive"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

func init() {
	apiRoutes["STREAM.SNAPSHOT"] = apiRoute{(*jsAccount).streamSnapshot, snapshotFail}
}

// snapshotFail is STREAM.SNAPSHOT's error reply.
func snapshotFail(err *api.Error) any {
	return &api.StreamSnapshotResponse{Response: api.Response{Type: api.TypeStreamSnapshotResponse, Error: err}}
}

// A backup's chunking, as nats-server's: chunk and window sizes are
// clamped to these bounds, and a receiver that acknowledges nothing for
// snapshotAckTimeout, or is not listening snapshotInterestWait after the
// answer, ends the transfer.
const (
	snapshotChunkDefault  = 128 << 10
	snapshotChunkMin      = 1 << 10
	snapshotChunkMax      = 1 << 20
	snapshotWindowDefault = 8 << 20
	snapshotWindowMax     = 32 << 20
)

var (
	snapshotAckTimeout   = 5 * time.Second
	snapshotInterestWait = 2 * time.Second
)

// streamSnapshot answers STREAM.SNAPSHOT: the stream's config and state,
// then the backup (package archive) in chunks on the request's deliver
// subject, paced by the receiver's acknowledgements, and an empty
// message whose status says how it ended (204, or 408/500 with why).
//
// The backup is read from a frozen view of the store taken here, so it
// is the stream exactly as the state in the answer describes it, however
// the stream changes while the chunks go out. Consumers are copied as
// they stand at the same moment.
func (a *jsAccount) streamSnapshot(req apiRequest, name string) any {
	if len(bytes.TrimSpace(req.body)) == 0 {
		return snapshotFail(api.NewBadRequestError())
	}
	s := a.lookup(name)
	if s == nil {
		return snapshotFail(api.NewStreamNotFoundError())
	}
	var sreq api.StreamSnapshotRequest
	if err := api.DecodeRequest(req.body, &sreq); err != nil {
		return snapshotFail(api.NewInvalidJSONError(err))
	}
	if !subject.ValidLiteralString(sreq.DeliverSubject) {
		return snapshotFail(api.NewSnapshotDeliverSubjectInvalidError())
	}
	release, err := a.e.xfer.begin(a)
	if err != nil {
		return snapshotFail(api.NewStreamSnapshotError(err))
	}
	b, err := s.frozenBackup(!sreq.NoConsumers)
	if err != nil {
		release()
		return snapshotFail(api.NewStreamSnapshotError(err))
	}
	cfg := s.config().WithServerMetadata(a.e.opts.ServerVersion, apiLevel)
	st := stateOf(b.state)
	// Answered before any chunk can go: the receiver learns the state
	// first (its progress counts against it).
	a.reply(req.reply, &api.StreamSnapshotResponse{Response: api.Response{Type: api.TypeStreamSnapshotResponse},
		Config: cfg, State: &st})
	go func() {
		status, err := a.sendBackup(a.e.xfer.ctx, b, &sreq)
		// Settled before the receiver hears the end, so that it may
		// start its next backup at once.
		b.close()
		release()
		a.acc.Publish(sreq.DeliverSubject, "", appendHeaderBlock(nil, status), nil)
		if err != nil {
			a.e.log.Warn("jetstream stream backup failed", "account", a.acc.Name(), "stream", name, "err", err)
			return
		}
		a.e.log.Info("jetstream stream backup sent", "account", a.acc.Name(), "stream", name,
			"messages", b.state.Msgs, "bytes", b.state.Bytes)
	}()
	return nil
}

// frozenBackup is what one backup copies: the stream's messages as a
// frozen view of the store holds them, and its consumers as they were
// when the view was taken.
type frozenBackup struct {
	s       *stream
	view    *store.View
	state   store.StreamState
	cfg     json.RawMessage
	created time.Time
	sources []archive.Source
	cons    []*archive.Consumer
}

// frozenBackup freezes s for a backup; the caller closes it.
func (s *stream) frozenBackup(consumers bool) (_ *frozenBackup, err error) {
	v, err := s.ap.st.View()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	st, err := v.StreamState(s.id)
	if errors.Is(err, store.ErrNotFound) {
		// No message committed yet.
		st, err = store.StreamState{}, nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(s.config())
	if err != nil {
		return nil, err
	}
	b := &frozenBackup{s: s, view: v, state: st, cfg: cfg, created: s.created}
	err = v.SourceProgress(s.id, func(key string, seq uint64, ident string) error {
		b.sources = append(b.sources, archive.Source{Key: key, Seq: seq, Identity: ident})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if consumers {
		s.mu.Lock()
		list := s.consumersLocked()
		s.mu.Unlock()
		sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
		for _, c := range list {
			ccfg := c.config()
			if !ccfg.IsDurable() || ccfg.Direct {
				// Ephemerals end with their clients, and a mirror's own
				// consumer with its mirror: neither outlives a restore.
				continue
			}
			raw, err := json.Marshal(ccfg)
			if err != nil {
				return nil, err
			}
			b.cons = append(b.cons, &archive.Consumer{Name: c.name, Config: raw, Created: c.created, State: c.encodeState()})
		}
	}
	return b, nil
}

func (b *frozenBackup) close() { b.view.Close() }

// write writes the archive to w: the stream, its messages (cold ones
// fetched from the object store), its consumers.
func (b *frozenBackup) write(ctx context.Context, w io.Writer) error {
	aw, err := archive.NewWriter(w)
	if err != nil {
		return err
	}
	st := b.state
	err = aw.Stream(&archive.Stream{Config: b.cfg, Created: b.created, State: archive.State{
		FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Bytes: st.Bytes,
		FirstTime: st.FirstTime, LastTime: st.LastTime}, Sources: b.sources})
	if err != nil {
		return err
	}
	if st.Msgs > 0 {
		err := b.view.ScanMsgs(b.s.id, st.FirstSeq, st.LastSeq+1, func(m *store.Message) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := b.s.hydrate(ctx, m); err != nil {
				return err
			}
			return aw.Msg(&archive.Msg{Seq: m.Seq, Time: m.Time, Subject: m.Subject, Header: m.Header, Data: m.Data})
		})
		if err != nil {
			return fmt.Errorf("reading messages: %w", err)
		}
	}
	for _, c := range b.cons {
		if err := aw.Consumer(c); err != nil {
			return err
		}
	}
	return aw.Close()
}

// sendBackup sends b's archive in chunks to the request's deliver
// subject. At most a window's worth of chunks is unacknowledged; each
// chunk's reply subject ($JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<n>, as
// nats-server names them) takes the acknowledgement. It returns the
// status of the empty message that ends the transfer: 204, or 408 or
// 500 with why.
func (a *jsAccount) sendBackup(ctx context.Context, b *frozenBackup, req *api.StreamSnapshotRequest) (status string, err error) {
	chunk := req.ChunkSize
	if chunk == 0 {
		chunk = snapshotChunkDefault
	}
	chunk = min(max(chunk, snapshotChunkMin), snapshotChunkMax)
	window := req.WindowSize
	if window == 0 {
		window = snapshotWindowDefault
	}
	window = max(min(max(window, snapshotChunkMin), snapshotWindowMax), chunk)
	to := req.DeliverSubject

	status = "204"
	defer func() {
		if err != nil && status == "204" {
			// A status line is one line.
			status = "500 " + strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error())
		}
	}()

	if !a.awaitInterest(ctx, to) {
		return "408 No Interest", errors.New("nobody listens on the deliver subject")
	}

	var id [8]byte
	_, _ = rand.Read(id[:])
	ackPrefix := "$JS.SNAPSHOT.ACK." + b.s.name() + "." + hex.EncodeToString(id[:])
	slots := make(chan struct{}, window/chunk)
	for range cap(slots) {
		slots <- struct{}{}
	}
	unsub, err := a.acc.SubscribeInternal(ackPrefix+".>", func(_, _, _, _ []byte) {
		select {
		case slots <- struct{}{}:
		default: // more acknowledgements than chunks sent: ignored
		}
	})
	if err != nil {
		return status, err
	}
	defer unsub()

	pr, pw := io.Pipe()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(b.write(wctx, pw))
	}()
	defer func() {
		pr.Close() // unblocks the writer
		cancel()
		<-written
	}()

	buf := make([]byte, chunk)
	ackWait := time.NewTimer(snapshotAckTimeout)
	defer ackWait.Stop()
	for n := 1; ; n++ {
		select {
		case <-slots:
		default:
			ackWait.Reset(snapshotAckTimeout)
			select {
			case <-slots:
			case <-ackWait.C:
				return "408 No Flow Response", errors.New("the receiver stopped acknowledging chunks")
			case <-ctx.Done():
				return status, ctx.Err()
			}
		}
		if !a.acc.HasSubscriber(to) {
			return "408 No Interest", errors.New("the receiver went away")
		}
		size, rerr := io.ReadFull(pr, buf)
		if size > 0 {
			a.acc.Publish(to, ackPrefix+"."+strconv.Itoa(size)+"."+strconv.Itoa(n), nil, buf[:size])
		}
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return status, nil
		case rerr != nil:
			return status, rerr
		}
	}
}

// awaitInterest waits, up to snapshotInterestWait, for someone to
// subscribe to subj itself: the receiver subscribes once it has the
// answer.
func (a *jsAccount) awaitInterest(ctx context.Context, subj string) bool {
	if a.acc.HasSubscriber(subj) {
		return true
	}
	seen := make(chan struct{}, 1)
	cancel := a.acc.WatchInterest(subj, func() {
		select {
		case seen <- struct{}{}:
		default:
		}
	})
	defer cancel()
	t := time.NewTimer(snapshotInterestWait)
	defer t.Stop()
	for !a.acc.HasSubscriber(subj) {
		select {
		case <-seen:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}
