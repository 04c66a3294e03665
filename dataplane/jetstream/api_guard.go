package jetstream

import (
	"errors"
	"runtime/debug"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// errInternal is what a requester hears when its request's handler
// panicked: the cause is in the node's log, not in the reply.
var errInternal = errors.New("internal error serving request")

// directPanicked is the status a direct get or pull request hears when
// serving it panicked: those replies are status messages, not JSON.
var directPanicked = []byte("NATS/1.0 500 Internal Server Error\r\n\r\n")

// guard keeps a panic in an API handler from ending the process. Every
// path that serves a request defers it first thing: serve on the API
// workers, and consumerNext and directGet, which run on the publisher's
// goroutine. A recovered panic is logged with its stack, answered in the
// route's reply shape (10051, nats-server's generic server error, for
// JSON routes; a 500 status for pull requests and direct gets) and
// counted as a failed API request. It must be deferred directly (recover
// only stops a panic from the deferred function itself).
//
// The handler may have held a lock when it panicked; handlers release
// theirs with defer or before calling out, so the node keeps serving.
func (a *jsAccount) guard(req apiRequest) {
	v := recover()
	if v == nil {
		return
	}
	a.e.log.Error("jetstream api request panicked", "account", a.acc.Name(), "subject", req.subject,
		"panic", v, "stack", string(debug.Stack()))
	defer func() {
		// Answering must not be what ends the process either.
		if v := recover(); v != nil {
			a.e.log.Error("jetstream api panic reply failed", "account", a.acc.Name(), "subject", req.subject, "panic", v)
		}
	}()
	subj := []byte(req.subject)
	if _, pull := a.pullSubject(subj); pull {
		a.answerStatus(req, directPanicked)
		return
	}
	if _, direct := a.directSubject(subj); direct {
		a.answerStatus(req, directPanicked)
		return
	}
	aerr := api.NewStreamGeneralError(errInternal)
	if r, _, ok := routeOf(a.apiOpName(req.subject)); ok && r.fail != nil {
		a.reply(req.reply, statsAs{resp: r.fail(aerr), counted: true, failed: true})
		return
	}
	a.reply(req.reply, &api.Response{Type: api.TypeSystemResponse, Error: aerr})
}

// answerStatus sends a status reply to a request answered inline and
// counts it as a failed API request.
func (a *jsAccount) answerStatus(req apiRequest, status []byte) {
	a.apiTotal.Add(1)
	a.apiErrors.Add(1)
	if req.reply != "" {
		a.acc.Publish(req.reply, "", status, nil)
	}
}
