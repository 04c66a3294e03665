package jetstream

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// apiWorkers is how many goroutines serve API requests. Requests are
// handed off the publisher's goroutine because some wait for the apply
// path (a create waits for its fsync).
const apiWorkers = 4

// apiRequest is one $JS.API request, copied out of the publisher's buffer.
type apiRequest struct {
	a              *jsAccount
	subject, reply string
	hdr, body      []byte
}

// onAPI receives every request on the account's API subjects.
func (a *jsAccount) onAPI(subject, reply, hdr, msg []byte) {
	if rest, ok := a.pullSubject(subject); ok {
		// Pull requests are queued right here, on the requester's
		// goroutine: quick (no apply path), and so served in the order
		// each connection sent them, as nats-server serves them.
		if len(reply) > 0 {
			a.consumerNext(apiRequest{a: a, subject: string(subject), reply: string(reply), body: msg}, rest)
		}
		return
	}
	if rest, ok := a.directSubject(subject); ok {
		// Direct gets only read the store: served inline, they skip a
		// goroutine hand-off on the path KV reads take.
		a.directGet(apiRequest{a: a, subject: string(subject), reply: string(reply), body: msg}, rest)
		return
	}
	req := apiRequest{a: a, subject: string(subject), reply: string(reply),
		hdr: bytes.Clone(hdr), body: bytes.Clone(msg)}
	select {
	case a.e.apiQueue <- req:
	default:
		// Overloaded: say so rather than queue without bound.
		a.reply(req.reply, &api.Response{Type: api.TypeSystemOverloaded, Error: api.NewInsufficientResourcesError()})
	}
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

func (e *Engine) apiLoop() {
	for req := range e.apiQueue {
		req.a.serve(req)
	}
}

// apiHandler serves one API operation; name is the subject's remainder
// (a stream name, possibly followed by more tokens).
type apiHandler func(a *jsAccount, req apiRequest, name string) any

// apiRoutes maps the API subject (after the prefix, before the name) to
// its handler.
var apiRoutes = map[string]apiHandler{
	"INFO":                   (*jsAccount).accountInfo,
	"STREAM.CREATE":          (*jsAccount).streamCreate,
	"STREAM.UPDATE":          (*jsAccount).streamUpdate,
	"STREAM.INFO":            (*jsAccount).streamInfo,
	"STREAM.DELETE":          (*jsAccount).streamDelete,
	"STREAM.PURGE":           (*jsAccount).streamPurge,
	"STREAM.NAMES":           (*jsAccount).streamNames,
	"STREAM.LIST":            (*jsAccount).streamList,
	"STREAM.MSG.GET":         (*jsAccount).msgGet,
	"STREAM.MSG.DELETE":      (*jsAccount).msgDelete,
	"STREAM.LEADER.STEPDOWN": (*jsAccount).streamStepdown,
}

// serve routes one request and sends its reply.
func (a *jsAccount) serve(req apiRequest) {
	op := strings.TrimPrefix(req.subject, "$JS.API.")
	if d := a.e.opts.Domain; d != "" {
		op = strings.TrimPrefix(op, "$JS."+d+".API.")
	}
	if strings.HasPrefix(op, "DIRECT.GET.") {
		// Direct gets are answered by the stream, not the API: nats-server
		// leaves them out of the account's API stats.
		a.directGet(req, strings.TrimPrefix(op, "DIRECT.GET."))
		return
	}
	route, name := op, ""
	for {
		if h, ok := apiRoutes[route]; ok {
			resp := h(a, req, name)
			if resp != nil {
				a.reply(req.reply, resp)
			}
			return
		}
		i := strings.LastIndexByte(route, '.')
		if i < 0 {
			break
		}
		if name == "" {
			name = route[i+1:]
		} else {
			name = route[i+1:] + "." + name
		}
		route = route[:i]
	}
	a.reply(req.reply, &api.Response{Type: api.TypeSystemResponse, Error: api.NewBadRequestError()})
}

// reply marshals resp to the requester and counts it in the API stats
// (api stats: counted when answered, as nats-server counts them, so an
// account info reply does not count itself).
func (a *jsAccount) reply(to string, resp any) {
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
	if to == "" {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		a.e.log.Error("jetstream api reply", "err", err)
		return
	}
	a.acc.Publish(to, "", nil, b)
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

func (a *jsAccount) accountInfo(req apiRequest, _ string) any {
	mem, file, streams := a.usage()
	resMem, resFile := a.reservations()
	unlimited := api.AccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1,
		MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}
	info := &api.AccountInfo{
		Tier: api.Tier{Memory: mem, Store: file, ReservedMemory: resMem, ReservedStore: resFile,
			Streams: streams, Limits: unlimited},
		Domain: a.e.opts.Domain,
		API:    api.APIStats{Level: apiLevel, Total: a.apiTotal.Load(), Errors: a.apiErrors.Load()},
	}
	return &api.AccountInfoResponse{Response: api.Response{Type: api.TypeAccountInfoResponse}, AccountInfo: info}
}
