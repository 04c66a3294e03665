package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// apiRequest is one $JS.API request, copied out of the publisher's buffer.
type apiRequest struct {
	a              *jsAccount
	subject, reply string
	hdr, body      []byte
	// asg, on a clustered node, is the meta catalog's assignment of the
	// stream a create, update or delete is for: the request reached this
	// node from the meta log, already checked cluster-wide.
	asg *assignment
	// meta: this node leads the meta group and runs the request's
	// cluster-wide checks and its meta entry (metaServe).
	meta bool
}

// onAPI receives every request on the account's API subjects.
func (a *jsAccount) onAPI(subject, reply, hdr, msg []byte) {
	meta := false
	if a.e.cl != nil {
		var answer bool
		if answer, meta = a.clusterAdmit(subject, reply, hdr, msg); !answer {
			return
		}
	}
	if a.enabled.Load() {
		if a.serveInline(subject, reply, msg) {
			return
		}
	} else if a.answeredInline(subject) {
		// Pull requests and direct gets are answered by consumers and
		// streams, not the API: with none running, the requester hears no
		// responders, as from nats-server.
		if len(reply) > 0 {
			a.acc.Publish(string(reply), "", noResponders, nil)
		}
		return
	}
	// Handed off the publisher's goroutine because some requests wait for
	// the apply path (a create waits for its fsync); scheduled fairly per
	// account (apisched.go).
	req := apiRequest{a: a, subject: string(subject), reply: string(reply),
		hdr: bytes.Clone(hdr), body: bytes.Clone(msg), meta: meta}
	if !a.e.apiSched.submit(&a.lane, req, !apiReadOnly(a.apiOpName(req.subject))) {
		// This account's queue is full: say so rather than queue without
		// bound. Other accounts' requests are still accepted.
		a.reply(req.reply, &api.Response{Type: api.TypeSystemOverloaded, Error: api.NewInsufficientResourcesError()})
	}
}

// serveInline serves pull requests and direct gets on the requester's
// goroutine and reports whether subject was one.
func (a *jsAccount) serveInline(subject, reply, msg []byte) bool {
	if rest, ok := a.pullSubject(subject); ok {
		// Pull requests are queued right here: quick (no apply path), and
		// so served in the order each connection sent them, as
		// nats-server serves them.
		if len(reply) > 0 {
			a.consumerNext(apiRequest{a: a, subject: string(subject), reply: string(reply), body: msg}, rest)
		}
		return true
	}
	if rest, ok := a.directSubject(subject); ok {
		// Direct gets only read the store: served inline, they skip a
		// goroutine hand-off on the path KV reads take.
		a.directGet(apiRequest{a: a, subject: string(subject), reply: string(reply), body: msg}, rest)
		return true
	}
	return false
}

// noResponders is the status a request gets when nobody serves its subject.
var noResponders = []byte("NATS/1.0 503\r\n\r\n")

// answeredInline reports whether subject is a pull request or direct get,
// which streams and consumers answer rather than the API workers.
func (a *jsAccount) answeredInline(subject []byte) bool {
	_, pull := a.pullSubject(subject)
	_, direct := a.directSubject(subject)
	return pull || direct
}

// pullSubject recognises CONSUMER.MSG.NEXT.<stream>.<consumer> and
// returns "<stream>.<consumer>".
func (a *jsAccount) pullSubject(subject []byte) (string, bool) {
	return a.apiOp(subject, "CONSUMER.MSG.NEXT.")
}

// directSubject recognises DIRECT.GET requests; rest is "<stream>[.<subject>]".
func (a *jsAccount) directSubject(subject []byte) (string, bool) {
	return a.apiOp(subject, "DIRECT.GET.")
}

// apiOp strips the API prefix (plain or domain) and then op from subject.
func (a *jsAccount) apiOp(subject []byte, next string) (string, bool) {
	op, ok := bytes.CutPrefix(subject, []byte("$JS.API."))
	if !ok {
		d := a.e.opts.Domain
		if d == "" {
			return "", false
		}
		if op, ok = bytes.CutPrefix(subject, []byte("$JS."+d+".API.")); !ok {
			return "", false
		}
	}
	rest, ok := bytes.CutPrefix(op, []byte(next))
	if !ok {
		return "", false
	}
	return string(rest), true
}

// apiHandler serves one API operation; name is the subject's remainder
// (a stream name, possibly followed by more tokens).
type apiHandler func(a *jsAccount, req apiRequest, name string) any

// apiRoute is one API operation: its handler, and the reply it gives
// when it fails before the handler runs (an account without JetStream),
// in the shape the handler's own error replies have.
type apiRoute struct {
	serve apiHandler
	fail  func(*api.Error) any
}

// failAs returns the error-reply shape of a route answering with a bare
// {"type":…,"error":…}.
func failAs(typ string) func(*api.Error) any {
	return func(err *api.Error) any { return &api.Response{Type: typ, Error: err} }
}

// apiRoutes maps the API subject (after the prefix, before the name) to
// its route.
var apiRoutes = map[string]apiRoute{
	"INFO": {(*jsAccount).accountInfo, func(err *api.Error) any {
		return &api.AccountInfoResponse{Response: api.Response{Type: api.TypeAccountInfoResponse, Error: err}}
	}},
	"STREAM.CREATE": {(*jsAccount).streamCreate, failAs(api.TypeStreamCreateResponse)},
	"STREAM.UPDATE": {(*jsAccount).streamUpdate, failAs(api.TypeStreamUpdateResponse)},
	"STREAM.INFO": {(*jsAccount).streamInfo, func(err *api.Error) any {
		return &api.StreamInfoResponse{Response: api.Response{Type: api.TypeStreamInfoResponse, Error: err}}
	}},
	"STREAM.DELETE": {(*jsAccount).streamDelete, failAs(api.TypeStreamDeleteResponse)},
	"STREAM.PURGE": {(*jsAccount).streamPurge, func(err *api.Error) any {
		return &api.StreamPurgeResponse{Response: api.Response{Type: api.TypeStreamPurgeResponse, Error: err}}
	}},
	"STREAM.NAMES": {(*jsAccount).streamNames, func(err *api.Error) any {
		return &api.StreamNamesResponse{Response: api.Response{Type: api.TypeStreamNamesResponse, Error: err}}
	}},
	"STREAM.LIST": {(*jsAccount).streamList, func(err *api.Error) any {
		return &api.StreamListResponse{Response: api.Response{Type: api.TypeStreamListResponse, Error: err},
			Streams: []*api.StreamInfo{}}
	}},
	"STREAM.MSG.GET":         {(*jsAccount).msgGet, failAs(api.TypeStreamMsgGetResponse)},
	"STREAM.MSG.DELETE":      {(*jsAccount).msgDelete, failAs(api.TypeStreamMsgDeleteResponse)},
	"STREAM.LEADER.STEPDOWN": {(*jsAccount).streamStepdown, failAs(api.TypeStreamLeaderStepdownResponse)},
}

// serve routes one request and sends its reply. An account without
// JetStream gets 10039 from every route, before its body is read, as
// nats-server checks the account first.
func (a *jsAccount) serve(req apiRequest) {
	defer a.guard(req)
	op := a.apiOpName(req.subject)
	if strings.HasPrefix(op, "DIRECT.GET.") {
		// Direct gets are answered by the stream, not the API: nats-server
		// leaves them out of the account's API stats.
		if !a.enabled.Load() {
			a.acc.Publish(req.reply, "", noResponders, nil)
			return
		}
		a.directGet(req, strings.TrimPrefix(op, "DIRECT.GET."))
		return
	}
	r, name, ok := routeOf(op)
	if !ok {
		a.reply(req.reply, &api.Response{Type: api.TypeSystemResponse, Error: api.NewBadRequestError()})
		return
	}
	if !a.enabled.Load() {
		a.refuseNotEnabled(req, r)
		return
	}
	if req.meta {
		a.metaServe(req, strings.TrimSuffix(op[:len(op)-len(name)], "."), name)
		return
	}
	fence, fenced := a.readLeadership(op, name)
	resp := r.serve(a, req, name)
	if req.asg != nil && replyCarries(resp, isNotAppended) {
		// A committed meta entry's request that found its partition gone
		// from this node: it will happen, and the partition's next leader
		// runs it again and answers (keepEntry). A 10008 would tell the
		// client it did not.
		return
	}
	if req.asg == nil && replyCarries(resp, isNotAppended) && a.passOn(req, r, name) {
		// Refused because the partition's leadership is moving or has
		// moved: its new leader answers.
		return
	}
	if req.asg == nil && replyCarries(resp, isStreamNotFound) && a.lostStream(name) {
		// The stream's partition left this node while the request
		// waited or ran (admitted while it held the stream, then
		// released): its new leader answers. The catalog holds the
		// stream, so "not found" would be a lie; with nobody to pass
		// the request to, the answer is that there is no leader.
		if !a.passOn(req, r, name) && r.fail != nil {
			a.reply(req.reply, r.fail(api.NewClusterNotAvailableError()))
		}
		return
	}
	switch {
	case resp == nil:
	case fenced:
		// Sent once the fence holds. A read that fails it was made while
		// this node believed it led, which it no longer provably does:
		// its answer may be stale, and the group's leader answers
		// instead, sent the request again (resendToLeader). The wait
		// is off this worker (the account's API slots are few, one on
		// two cores, and a read must not hold one for a round trip of
		// its group, or for a group that commits nothing), up to
		// maxFencingReplies of the account's at once; past that it is
		// on the worker, so an account flooding reads while its group
		// cannot commit slows its own lane, not the node's memory.
		fenceThenReply := func() {
			if fence.ReadFence(readFenceTimeout) == nil {
				a.reply(req.reply, resp)
				return
			}
			// A fence fails as the leadership moves (a transfer, an
			// election): the successor is often not known yet, and
			// sent on only once it is, the request is answered instead
			// of left to the client's timeout.
			if fence.AwaitOtherLeader(readFenceTimeout) != "" {
				a.resendToLeader(req, fence)
			}
		}
		if a.fencing.Add(1) > maxFencingReplies {
			a.fencing.Add(-1)
			fenceThenReply()
			return
		}
		go func() {
			defer a.fencing.Add(-1)
			fenceThenReply()
		}()
	default:
		a.reply(req.reply, resp)
	}
}

// resendToLeader publishes req, which this node admitted as grp's leader
// and cannot answer (no longer leading, or not provably), again into the
// account if grp has another leader now, and reports whether it did: the
// request reached every node while this one led, so the others dropped
// it, and only sent again does it reach the leader, which holds or
// serves it. One that finds no other leader known is left to the
// client's timeout. It may run twice where two nodes believed they led
// at once, as a client's retry after its timeout would run it.
func (a *jsAccount) resendToLeader(req apiRequest, grp ReplicaGroup) bool {
	if req.reply == "" {
		return false
	}
	if l := grp.Leader(); l == "" || l == a.e.cl.r.NodeID() {
		return false
	}
	a.acc.Publish(req.subject, req.reply, req.hdr, req.body)
	return true
}

// isStreamNotFound reports whether err is 10059, stream not found.
func isStreamNotFound(err error) bool { return errors.Is(err, api.CodeStreamNotFound) }

// lostStream reports whether the stream rest names (its first token) is
// in the cluster's catalog yet not held here: on a cluster, a request
// admitted for it while this node led its partition that then finds it
// gone was overtaken by a leadership change.
func (a *jsAccount) lostStream(rest string) bool {
	c := a.e.cl
	if c == nil || c.r == nil {
		return false
	}
	stream, _, _ := strings.Cut(rest, ".")
	asg := c.catalog.lookup(a.acc.Name(), stream)
	return asg != nil && !c.holds(asg)
}

// routeOf finds the route serving op (the subject after the API prefix):
// the longest leading run of tokens naming one in apiRoutes; name is the
// rest of op after it (a stream name, possibly followed by more tokens).
func routeOf(op string) (r apiRoute, name string, ok bool) {
	for route := op; ; {
		if r, ok := apiRoutes[route]; ok {
			return r, strings.TrimPrefix(op[len(route):], "."), true
		}
		i := strings.LastIndexByte(route, '.')
		if i < 0 {
			return apiRoute{}, "", false
		}
		route = route[:i]
	}
}

// apiOpName strips the API prefix (plain or domain) from subject, as
// serve does.
func (a *jsAccount) apiOpName(subject string) string {
	op := strings.TrimPrefix(subject, "$JS.API.")
	if d := a.e.opts.Domain; d != "" {
		op = strings.TrimPrefix(op, "$JS."+d+".API.")
	}
	return op
}

// refuseNotEnabled answers a request to an account without JetStream:
// 10039 in the route's reply shape. nats-server keeps no API stats for
// such an account, so it is not counted.
func (a *jsAccount) refuseNotEnabled(req apiRequest, r apiRoute) {
	if r.fail == nil {
		// A route nobody serves without JetStream (pull requests).
		if req.reply != "" {
			a.acc.Publish(req.reply, "", noResponders, nil)
		}
		return
	}
	a.reply(req.reply, statsAs{resp: r.fail(api.NewNotEnabledForAccountError())})
}

// reply marshals resp to the requester and counts it in the API stats
// (api stats: counted when answered, as nats-server counts them, so an
// account info reply does not count itself).
func (a *jsAccount) reply(to string, resp any) {
	var hdr []byte
	if wh, ok := resp.(withHeader); ok {
		resp, hdr = wh.resp, wh.hdr
	}
	counted, failed := true, false
	if e, ok := resp.(interface{ ToError() error }); ok {
		failed = e.ToError() != nil
	}
	if st, ok := resp.(statsAs); ok {
		resp, counted, failed = st.resp, st.counted, st.failed
	}
	if counted {
		a.apiTotal.Add(1)
		if failed {
			a.apiErrors.Add(1)
		}
	}
	if to == "" || failed && replyFateUnknown(resp) {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		a.e.log.Error("jetstream api reply", "err", err)
		return
	}
	a.acc.Publish(to, "", hdr, b)
}

// statsAs is a reply the API stats count as nats-server counts it rather
// than by what it carries: a found STREAM.MSG.GET not at all, the store's
// refusals of STREAM.MSG.DELETE as successes.
type statsAs struct {
	resp            any
	counted, failed bool
}

// decode reads an optional JSON body into v; an empty body leaves v as is.
func decode(body []byte, v any) *api.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := api.DecodeRequest(body, v); err != nil {
		return api.NewInvalidJSONError(err)
	}
	return nil
}

func (a *jsAccount) accountInfo(apiRequest, string) any {
	return &api.AccountInfoResponse{Response: api.Response{Type: api.TypeAccountInfoResponse}, AccountInfo: a.accountInfoBody()}
}
