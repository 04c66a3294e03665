package jetstream

import (
	"encoding/json"
	"errors"
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

// streamConfigFromRequest decodes and checks a create/update body.
func (a *jsAccount) streamConfigFromRequest(typ string, req apiRequest, name string) (*api.StreamConfig, *api.Error) {
	if !api.ValidName(name) {
		if api.HasPathSeparator(name) {
			return nil, api.NewStreamNameContainsPathSeparatorsError()
		}
		return nil, api.NewStreamInvalidConfigError(errors.New("invalid stream name"))
	}
	var creq api.StreamConfigRequest
	if err := api.DecodeRequest(req.body, &creq); err != nil {
		return nil, api.NewInvalidJSONError(err)
	}
	cfg := &creq.StreamConfig
	if cfg.Name == "" {
		cfg.Name = name
	}
	if cfg.Name != name {
		return nil, api.NewStreamNameMismatchError()
	}
	norm, aerr := cfg.Normalize(api.StreamEnv{
		Pedantic: creq.Pedantic,
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
	if norm.Replicas > 1 {
		return nil, api.NewReplicasNotSupportedError()
	}
	if norm.Mirror != nil || len(norm.Sources) > 0 {
		return nil, api.NewStreamInvalidConfigError(errors.New("mirrors and sources are not supported yet"))
	}
	norm.StampRequiredLevel()
	return norm, nil
}

func (a *jsAccount) streamCreate(req apiRequest, name string) any {
	const typ = api.TypeStreamCreateResponse
	cfg, aerr := a.streamConfigFromRequest(typ, req, name)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	a.create.Lock()
	defer a.create.Unlock()
	if s := a.lookup(name); s != nil {
		if !sameConfig(s.config(), cfg) {
			return streamErr(typ, api.NewStreamNameInUseError())
		}
		info, _ := s.info(nil)
		return &api.StreamCreateResponse{Response: api.Response{Type: typ}, StreamInfo: info}
	}
	if err := api.CheckSubjectOverlap(cfg.Subjects, a.configsExcept(name)); err != nil {
		return streamErr(typ, err)
	}
	if err := a.e.checkReservation(cfg, 0); err != nil {
		return streamErr(typ, err)
	}
	ap := a.e.applierFor(cfg)
	s := newStream(a.e, ap, a.e.newStreamID(), cfg, a.e.opts.Now().UTC())
	if cfg.FirstSeq > 1 {
		s.mu.state.FirstSeq, s.mu.state.LastSeq = cfg.FirstSeq, cfg.FirstSeq-1
	}
	if r := ap.apply(&proposal{s: s, acct: a, kind: propCreate}); r.err != nil {
		return streamErr(typ, api.Prefer(r.err, api.NewStreamCreateError(r.err)))
	}
	a.e.mu.Lock()
	a.e.mu.byID[s.id] = s
	a.e.mu.Unlock()
	if err := a.attach(s); err != nil {
		return streamErr(typ, api.NewStreamCreateError(err))
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
	cfg, aerr := a.streamConfigFromRequest(typ, req, name)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	a.create.Lock()
	defer a.create.Unlock()
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	next, aerr := api.CheckStreamUpdate(s.config(), cfg)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	if err := api.CheckSubjectOverlap(next.Subjects, a.configsExcept(name)); err != nil {
		return streamErr(typ, err)
	}
	if err := a.e.checkReservation(next, max(s.config().MaxBytes, 0)); err != nil {
		return streamErr(typ, err)
	}
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propUpdate, cfg: next}); r.err != nil {
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
	var ireq api.StreamInfoRequest
	if err := decode(req.body, &ireq); err != nil {
		return streamErr(typ, err)
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	info, aerr := s.info(&ireq)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	resp := &api.StreamInfoResponse{Response: api.Response{Type: typ}, StreamInfo: info}
	if n := len(info.State.Subjects); n > 0 {
		resp.Paged = api.Paged{Total: n, Offset: ireq.Offset, Limit: n}
	}
	return resp
}

func (a *jsAccount) streamDelete(req apiRequest, name string) any {
	const typ = api.TypeStreamDeleteResponse
	a.create.Lock()
	defer a.create.Unlock()
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	s.detach()
	if r := s.ap.apply(&proposal{s: s, acct: a, kind: propRemove}); r.err != nil {
		a.attach(s)
		return streamErr(typ, api.Prefer(r.err, api.NewStreamDeleteError(r.err)))
	}
	a.mu.Lock()
	delete(a.mu.streams, name)
	a.mu.Unlock()
	a.e.mu.Lock()
	delete(a.e.mu.byID, s.id)
	a.e.mu.Unlock()
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

func (a *jsAccount) streamPurge(req apiRequest, name string) any {
	const typ = api.TypeStreamPurgeResponse
	var preq api.StreamPurgeRequest
	if err := decode(req.body, &preq); err != nil {
		return &api.StreamPurgeResponse{Response: *streamErr(typ, err)}
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
	case preq.Sequence > 0 && preq.Keep > 0:
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewBadRequestError())}
	case preq.Subject != "" && !subject.ValidFilterString(preq.Subject):
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.NewStreamPurgeFailedError(errors.New("invalid subject")))}
	}
	r := s.ap.apply(&proposal{s: s, acct: a, kind: propPurge, purge: preq})
	if r.err != nil {
		return &api.StreamPurgeResponse{Response: *streamErr(typ, api.Prefer(r.err, api.NewStreamPurgeFailedError(r.err)))}
	}
	return &api.StreamPurgeResponse{Response: api.Response{Type: typ}, Success: true, Purged: r.purged}
}

// streamsMatching lists the account's streams, optionally only those whose
// subjects overlap filter.
func (a *jsAccount) streamsMatching(filter string) []*stream {
	all := a.sortedStreams()
	if filter == "" {
		return all
	}
	out := all[:0]
	for _, s := range all {
		for _, subj := range s.config().Subjects {
			if subject.Overlaps(filter, subj) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func page[T any](items []T, offset, size int) []T {
	if offset >= len(items) {
		return nil
	}
	items = items[offset:]
	return items[:min(size, len(items))]
}

func (a *jsAccount) streamNames(req apiRequest, _ string) any {
	const typ = api.TypeStreamNamesResponse
	var nreq api.StreamNamesRequest
	if err := decode(req.body, &nreq); err != nil {
		return &api.StreamNamesResponse{Response: *streamErr(typ, err)}
	}
	all := a.streamsMatching(nreq.Subject)
	names := []string{}
	for _, s := range page(all, nreq.Offset, namesPage) {
		names = append(names, s.name())
	}
	return &api.StreamNamesResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: len(all), Offset: nreq.Offset, Limit: namesPage}, Streams: names}
}

func (a *jsAccount) streamList(req apiRequest, _ string) any {
	const typ = api.TypeStreamListResponse
	var lreq api.StreamListRequest
	if err := decode(req.body, &lreq); err != nil {
		return &api.StreamListResponse{Response: *streamErr(typ, err)}
	}
	all := a.streamsMatching(lreq.Subject)
	infos := []*api.StreamInfo{}
	for _, s := range page(all, lreq.Offset, listPage) {
		if info, err := s.info(nil); err == nil {
			infos = append(infos, info)
		}
	}
	return &api.StreamListResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: len(all), Offset: lreq.Offset, Limit: listPage}, Streams: infos}
}

func (a *jsAccount) streamStepdown(_ apiRequest, name string) any {
	const typ = api.TypeStreamLeaderStepdownResponse
	if a.lookup(name) == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	// A single node leads every stream; there is nobody to step down to.
	return streamErr(typ, api.NewClusterRequiredError())
}

func (a *jsAccount) msgDelete(req apiRequest, name string) any {
	const typ = api.TypeStreamMsgDeleteResponse
	var dreq api.MsgDeleteRequest
	if err := decode(req.body, &dreq); err != nil {
		return streamErr(typ, err)
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	r := s.ap.apply(&proposal{s: s, acct: a, kind: propDelete, seq: dreq.Seq, erase: !dreq.NoErase})
	if r.err != nil {
		return streamErr(typ, api.Prefer(r.err, api.NewStreamMsgDeleteFailedError(r.err)))
	}
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

func (a *jsAccount) msgGet(req apiRequest, name string) any {
	const typ = api.TypeStreamMsgGetResponse
	var greq api.MsgGetRequest
	if err := decode(req.body, &greq); err != nil {
		return streamErr(typ, err)
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	m, aerr := s.get(&greq)
	if aerr != nil {
		return streamErr(typ, aerr)
	}
	return &api.MsgGetResponse{Response: api.Response{Type: typ}, Message: &api.StoredMsg{
		Subject: m.Subject, Sequence: m.Seq, Header: m.Header, Data: m.Data, Time: time.Unix(0, m.Time).UTC(),
	}}
}

// get answers the three lookups of MSG.GET and DIRECT.GET.
func (s *stream) get(req *api.MsgGetRequest) (store.Message, *api.Error) {
	var m store.Message
	var err error
	switch {
	case req.LastFor != "" && req.Seq == 0 && req.NextFor == "":
		m, err = s.ap.st.LastMsg(s.id, req.LastFor)
	case req.NextFor != "" && req.LastFor == "":
		m, err = s.ap.st.NextMsg(s.id, max(req.Seq, 1), req.NextFor)
	case req.Seq > 0 && req.LastFor == "" && req.NextFor == "":
		m, err = s.ap.st.LoadMsg(s.id, req.Seq)
	default:
		return m, api.NewBadRequestError()
	}
	if errors.Is(err, store.ErrNotFound) {
		return m, api.NewNoMessageFoundError()
	}
	if err != nil {
		return m, api.NewStreamGeneralError(err)
	}
	return m, nil
}
