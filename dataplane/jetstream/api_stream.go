package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// Page sizes nats-server uses for STREAM.NAMES and STREAM.LIST.
const (
	namesPage = 1024
	listPage  = 256
)

func streamErr(typ string, err *api.Error) *api.Response {
	return &api.Response{Type: typ, Error: err}
}

// streamConfigFromRequest decodes and checks a create/update body, in
// nats-server's order: the JSON, then (for a create) the name in the
// subject, path separators and sealed, then the config itself, and (for
// an update, whose config is checked first) the name.
func (a *jsAccount) streamConfigFromRequest(req apiRequest, name string, create bool) (*api.StreamConfig, *api.Error) {
	var creq api.StreamConfigRequest
	if err := api.DecodeRequest(req.body, &creq); err != nil {
		return nil, api.NewInvalidJSONError(err)
	}
	return a.checkStreamConfig(&creq, name, create, false)
}

// checkStreamConfig is streamConfigFromRequest's checks of a decoded
// config. A restore's config (restore true) is a create's, except that it
// may be sealed: the backup of a sealed stream comes back sealed.
func (a *jsAccount) checkStreamConfig(creq *api.StreamConfigRequest, name string, create, restore bool) (*api.StreamConfig, *api.Error) {
	cfg := &creq.StreamConfig
	// nats-server looks for the tier before it checks a new stream's
	// config: one no tier covers is refused whatever else is wrong with it.
	if _, _, ok := a.limits.Load().selectTier(cfg.Replicas); create && !ok {
		return nil, api.NewNoLimitsError()
	}
	if create {
		switch {
		case cfg.Name != name:
			return nil, api.NewStreamNameMismatchError()
		case api.HasPathSeparator(name):
			return nil, api.NewStreamNameContainsPathSeparatorsError()
		case cfg.Sealed && !restore:
			return nil, api.NewStreamInvalidConfigError(errors.New("stream configuration for create can not be sealed"))
		case cfg.MirrorDirect && cfg.Mirror == nil:
			return nil, api.NewStreamInvalidConfigError(errors.New("stream has no mirror but does have mirror direct"))
		}
	}
	norm, aerr := cfg.Normalize(api.StreamEnv{
		Pedantic: creq.Pedantic,
		Limits:   a.streamTierLimits(cfg.Replicas),
		Lookup: func(n string) (*api.StreamConfig, bool) {
			if s := a.lookup(n); s != nil {
				return s.config(), true
			}
			return nil, false
		},
	})
	if aerr != nil {
		return nil, aerr
	}
	if !create && norm.Name != name {
		return nil, api.NewStreamNameMismatchError()
	}
	if norm.Replicas > 1 && a.e.cl == nil {
		return nil, api.NewReplicasNotSupportedError()
	}
	if _, err := compileTransforms(norm); err != nil {
		return nil, err
	}
	norm.StampRequiredLevel()
	return norm, nil
}

// streamTierLimits returns the limits of the tier a stream of replicas
// falls in, for the config checks (max_bytes_required, the per-stream
// max_bytes ceiling); nil in open mode or when no tier applies (a create
// is refused for that earlier, an update later).
func (a *jsAccount) streamTierLimits(replicas int) *api.AccountLimits {
	lim := a.limits.Load()
	if lim == nil {
		return nil
	}
	if _, tl, ok := lim.selectTier(max(replicas, 1)); ok {
		return &tl
	}
	return nil
}

func (a *jsAccount) streamCreate(req apiRequest, name string) any {
	const typ = api.TypeStreamCreateResponse
	cfg, aerr := a.streamConfigFromRequest(req, name, true)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	// nats-server answers a repeated create exactly like the first one,
	// did_create included.
	s, aerr := a.createStream(cfg, req.asg)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	info, _ := s.info(nil)
	return &api.StreamCreateResponse{Response: api.Response{Type: typ}, StreamInfo: info, DidCreate: true}
}

// sameConfig reports whether a create repeats an existing stream's config.
func sameConfig(a, b *api.StreamConfig) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func (a *jsAccount) streamUpdate(req apiRequest, name string) any {
	const typ = api.TypeStreamUpdateResponse
	cfg, aerr := a.streamConfigFromRequest(req, name, false)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	if req.asg != nil {
		a.awaitCreate(name, req.asg.ID) // as a committed delete does
	}
	a.create.Lock()
	defer a.create.Unlock()
	if !a.enabled.Load() {
		return streamErr(typ, api.NewNotEnabledForAccountError())
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	next, aerr := api.CheckStreamUpdate(s.config(), cfg)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	if err := a.checkSubjectOverlap(next.Subjects, name); err != nil {
		return streamErr(typ, err)
	}
	if err := a.checkStreamLimits(next, s); err != nil {
		return streamErr(typ, err)
	}
	if err := a.e.reserve(s, next); err != nil {
		return streamErr(typ, err)
	}
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propUpdate, cfg: next}); r.err != nil {
		a.e.track(s) // back to the claim of the config still in force
		return streamErr(typ, api.Prefer(r.err, api.NewStreamUpdateError(r.err)))
	}
	s.detach()
	if err := a.attach(s); err != nil {
		return streamErr(typ, api.NewStreamUpdateError(err))
	}
	info, _ := s.info(nil)
	return &api.StreamUpdateResponse{Response: api.Response{Type: typ}, StreamInfo: info}
}

func (a *jsAccount) streamInfo(req apiRequest, name string) any {
	const typ = api.TypeStreamInfoResponse
	// Error replies carry the paging members too (all zero), as
	// nats-server's do.
	fail := func(err *api.Error) any {
		return &api.StreamInfoResponse{Response: api.Response{Type: typ, Error: err}}
	}
	var ireq api.StreamInfoRequest
	if err := decode(req.body, &ireq); err != nil {
		return fail(err)
	}
	s := a.lookup(name)
	if s == nil {
		return fail(api.NewStreamNotFoundError())
	}
	info, aerr := s.info(&ireq)
	if aerr != nil {
		return fail(aerr)
	}
	if n := a.e.opts.ServerName; n != "" && info.Cluster == nil {
		info.Cluster = &api.ClusterInfo{Leader: n}
	}
	resp := &api.StreamInfoResponse{Response: api.Response{Type: typ}, StreamInfo: info}
	if subs := info.State.Subjects; len(subs) > 0 {
		offset := max(ireq.Offset, 0)
		resp.Paged = api.Paged{Total: len(subs), Offset: offset, Limit: api.MaxSubjectDetails}
		if offset > 0 || len(subs) > api.MaxSubjectDetails {
			info.State.Subjects = pageSubjects(subs, offset, api.MaxSubjectDetails)
		}
	}
	return resp
}

// pageSubjects returns one page of a subjects_filter result, by subject
// order; nil when the page is empty.
func pageSubjects(subs map[string]uint64, offset, size int) map[string]uint64 {
	names := make([]string, 0, len(subs))
	for subj := range subs {
		names = append(names, subj)
	}
	sort.Strings(names)
	names, _ = page(names, offset, size)
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(names))
	for _, subj := range names {
		out[subj] = subs[subj]
	}
	return out
}

func (a *jsAccount) streamDelete(req apiRequest, name string) any {
	const typ = api.TypeStreamDeleteResponse
	if !api.IsEmptyRequest(req.body) {
		return streamErr(typ, api.NewNotEmptyRequestError())
	}
	if req.asg != nil {
		// A committed meta delete (or update) of a stream whose create
		// is still committing here (materialize runs off the account's
		// lane): run once the stream is made, or the stream would
		// outlive the catalog's delete (or keep the config before it).
		a.awaitCreate(name, req.asg.ID)
	}
	a.create.Lock()
	defer a.create.Unlock()
	if !a.enabled.Load() {
		return streamErr(typ, api.NewNotEnabledForAccountError())
	}
	s := a.lookup(name)
	if req.asg != nil && (s == nil || s.id != req.asg.ID) {
		// A committed meta delete run again by the partition's next
		// leader: the stream it names is gone already (its previous
		// leader deleted it, or take dropped it as an orphan). A stream
		// of that name here now is a later one, not this request's.
		return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
	}
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	s.detach()
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propRemove}); r.err != nil {
		a.attach(s)
		return streamErr(typ, api.Prefer(r.err, api.NewStreamDeleteError(r.err)))
	}
	a.forget(s)
	a.e.untrack(s)
	a.endConsumers(s)
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

func (a *jsAccount) streamPurge(req apiRequest, name string) any {
	const typ = api.TypeStreamPurgeResponse
	var preq api.StreamPurgeRequest
	if err := decode(req.body, &preq); err != nil {
		return &api.StreamPurgeResponse{Response: *streamErr(typ, err)}
	}
	// The request's own checks come before the stream's, as on
	// nats-server. An invalid filter would match nothing there and
	// everything here (the store reads it as a prefix); a sequence past
	// MaxRequestSeq would leave the stream's next sequences to wrap to 0.
	// Both are refused, and nothing is purged.
	switch {
	case preq.Sequence > 0 && preq.Keep > 0,
		preq.Subject != "" && !subject.ValidFilterString(preq.Subject),
		preq.Sequence > api.MaxRequestSeq:
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewBadRequestError())}
	}
	s := a.lookup(name)
	if s == nil {
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewStreamNotFoundError())}
	}
	cfg := s.config()
	switch {
	case cfg.Sealed:
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewStreamSealedError())}
	case cfg.DenyPurge:
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewStreamPurgeFailedError(api.ErrCausePurgeNotPermitted))}
	}
	r := s.ap.apply(&proposal{s: s, acct: a, kind: propPurge, purge: preq})
	if r.err != nil {
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.Prefer(r.err, api.NewStreamPurgeFailedError(r.err)))}
	}
	return &api.StreamPurgeResponse{Response: api.Response{Type: typ}, Success: true, Purged: r.purged}
}

// streamsMatching lists the account's streams in name order, optionally
// only those whose subjects overlap filter.
func (a *jsAccount) streamsMatching(filter string) []*stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.streams.matching(filter)
}

// page returns the page of at most size items starting at offset, and
// the offset it used: the request's, held to [0, len(items)] as
// nats-server holds it, so any offset a client sends is answered (an
// empty page past the end).
func page[T any](items []T, offset, size int) ([]T, int) {
	offset = min(max(offset, 0), len(items))
	items = items[offset:]
	return items[:min(max(size, 0), len(items))], offset
}

func (a *jsAccount) streamNames(req apiRequest, _ string) any {
	const typ = api.TypeStreamNamesResponse
	var nreq api.StreamNamesRequest
	if err := decode(req.body, &nreq); err != nil {
		return &api.StreamNamesResponse{Response: *streamErr(typ, err)}
	}
	var names []string // No names is null on the wire, not [], as nats-server sends it.
	var total, offset int
	if c := a.e.cl; c != nil {
		all := c.catalogNames(a.acc.Name(), nreq.Subject)
		var list []*assignment
		list, offset = page(all, nreq.Offset, namesPage)
		total = len(all)
		for _, asg := range list {
			names = append(names, asg.Name)
		}
	} else {
		all := a.streamsMatching(nreq.Subject)
		var list []*stream
		list, offset = page(all, nreq.Offset, namesPage)
		total = len(all)
		for _, s := range list {
			names = append(names, s.name())
		}
	}
	return &api.StreamNamesResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: total, Offset: offset, Limit: namesPage}, Streams: names}
}

func (a *jsAccount) streamList(req apiRequest, _ string) any {
	const typ = api.TypeStreamListResponse
	var lreq api.StreamListRequest
	if err := decode(req.body, &lreq); err != nil {
		return &api.StreamListResponse{Response: *streamErr(typ, err)}
	}
	if c := a.e.cl; c != nil {
		all := c.catalogNames(a.acc.Name(), lreq.Subject)
		list, offset := page(all, lreq.Offset, listPage)
		infos := a.catalogInfos(list)
		return &api.StreamListResponse{Response: api.Response{Type: typ},
			Paged: api.Paged{Total: len(all), Offset: offset, Limit: listPage}, Streams: infos}
	}
	all := a.streamsMatching(lreq.Subject)
	list, offset := page(all, lreq.Offset, listPage)
	infos := []*api.StreamInfo{}
	for _, s := range list {
		if info, err := s.info(nil); err == nil {
			// nats-server lists configs as stored, without the server's
			// version and level that its other replies add.
			info.Config = *s.config()
			infos = append(infos, info)
		}
	}
	return &api.StreamListResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: len(all), Offset: offset, Limit: listPage}, Streams: infos}
}

func (a *jsAccount) streamStepdown(req apiRequest, name string) any {
	const typ = api.TypeStreamLeaderStepdownResponse
	if a.e.cl == nil {
		// A single node leads every stream; there is nobody to step down
		// to. nats-server says so before looking the stream up.
		return streamErr(typ, api.NewClusterRequiredError())
	}
	var sreq struct {
		Placement *struct {
			Preferred string `json:"preferred"`
		} `json:"placement"`
	}
	if err := decode(req.body, &sreq); err != nil {
		return streamErr(typ, err)
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	preferred := ""
	if sreq.Placement != nil {
		preferred = sreq.Placement.Preferred
	}
	if err := a.stepdown(s, preferred); err != nil {
		return streamErr(typ, err)
	}
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

func (a *jsAccount) msgDelete(req apiRequest, name string) any {
	const typ = api.TypeStreamMsgDeleteResponse
	if len(bytes.TrimSpace(req.body)) == 0 {
		return streamErr(typ, api.NewBadRequestError())
	}
	var dreq api.MsgDeleteRequest
	if err := decode(req.body, &dreq); err != nil {
		return streamErr(typ, err)
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	switch cfg := s.config(); {
	case cfg.Sealed:
		return streamErr(typ, api.NewStreamSealedError())
	case cfg.DenyDelete:
		return streamErr(typ, api.NewStreamMsgDeleteFailedError(api.ErrCauseMsgDeleteNotPermitted))
	}
	r := s.ap.apply(&proposal{s: s, acct: a, kind: propDelete, seq: dreq.Seq, erase: !dreq.NoErase})
	if r.err != nil {
		return statsAs{resp: streamErr(typ, api.Prefer(r.err, api.NewStreamMsgDeleteFailedError(r.err))), counted: true}
	}
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

func (a *jsAccount) msgGet(req apiRequest, name string) any {
	const typ = api.TypeStreamMsgGetResponse
	if len(bytes.TrimSpace(req.body)) == 0 {
		return streamErr(typ, api.NewBadRequestError())
	}
	var greq api.MsgGetRequest
	if err := decode(req.body, &greq); err != nil {
		return streamErr(typ, err)
	}
	if greq.Batch > 0 || greq.MaxBytes > 0 || len(greq.MultiLastFor) > 0 || !validGet(&greq) {
		return streamErr(typ, api.NewBadRequestError())
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	m, aerr := s.get(&greq)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	sm := &api.StoredMsg{Subject: m.Subject, Sequence: m.Seq, Header: m.Header, Data: m.Data, Time: time.Unix(0, m.Time).UTC()}
	if greq.NoHeaders {
		sm.Header = nil
	}
	return statsAs{resp: &api.MsgGetResponse{Response: api.Response{Type: typ}, Message: sm}}
}

// validGet reports whether a get request names exactly one way to find
// its message, by nats-server's rules: seq, last_by_subj, or
// next_by_subj (from seq or start_time), or start_time alone.
func validGet(req *api.MsgGetRequest) bool {
	switch {
	case req.Seq > 0 && req.LastFor != "",
		req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && req.StartTime == nil,
		req.Seq > 0 && req.StartTime != nil,
		req.StartTime != nil && req.LastFor != "",
		req.LastFor != "" && req.NextFor != "":
		return false
	}
	return true
}

// get answers the lookups of MSG.GET and DIRECT.GET; req passed validGet.
func (s *stream) get(req *api.MsgGetRequest) (store.Message, *api.Error) {
	var m store.Message
	var err error
	for _, f := range []string{req.LastFor, req.NextFor} {
		if f != "" && !subject.ValidFilterString(f) {
			// No subject is on an invalid filter: nats-server finds
			// nothing, where the store would read it as a prefix.
			return m, api.NewNoMessageFoundError()
		}
	}
	seq := req.Seq
	if req.StartTime != nil {
		seq, err = s.firstAtOrAfter(unixNanos(*req.StartTime))
	}
	switch {
	case err != nil:
	case req.NextFor != "":
		m, err = s.ap.st.NextMsg(s.id, max(seq, 1), req.NextFor)
	case req.StartTime != nil:
		m, err = s.ap.st.NextMsg(s.id, seq, "")
	case seq > 0:
		m, err = s.ap.st.LoadMsg(s.id, seq)
	default:
		m, err = s.lastFor(req.LastFor)
	}
	if err == nil {
		err = s.hydrate(context.Background(), &m)
	}
	if errors.Is(err, store.ErrNotFound) {
		return m, api.NewNoMessageFoundError()
	}
	if err != nil {
		return m, api.NewStreamGeneralError(err)
	}
	return m, nil
}

// lastFor finds the newest message on a subject. For a literal subject of
// a stream that keeps per-subject summaries (KV buckets do), the summary
// names the sequence and one point read fetches it, if the message there
// is on the subject; otherwise, or if that message is not committed yet,
// the subject index is searched.
func (s *stream) lastFor(filter string) (store.Message, error) {
	if subject.IsLiteral(filter) {
		s.mu.Lock()
		var seq uint64
		if ss := s.mu.subjects[filter]; ss != nil {
			seq = ss.last
		}
		s.mu.Unlock()
		if seq > 0 && seq <= s.durable.Load() {
			if m, err := s.ap.st.LoadMsgOn(s.id, seq, filter); err == nil {
				return m, nil
			}
		}
	}
	return s.ap.st.LastMsg(s.id, filter)
}
