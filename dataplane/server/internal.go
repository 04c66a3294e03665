package server

import (
	"fmt"

	"github.com/contrail/contrail/dataplane/subject"
)

// MsgHandler receives the messages of an internal subscription. hdr is nil
// for a message without headers. The slices alias the publisher's buffers
// and are valid only during the call: a handler copies what it keeps.
//
// Handlers run on the publisher's goroutine, in publish order for that
// publisher, so they must not block: hand long work to another goroutine.
type MsgHandler = func(subject, reply, hdr, msg []byte)

// SubscribeInternal subscribes a handler inside the account, the way
// server-side services (the JetStream API, a stream capturing its
// subjects) listen: they see exactly what a client subscription on filter
// in this account would see, and nothing of other accounts. The returned
// function unsubscribes.
func (a *Account) SubscribeInternal(filter string, h MsgHandler) (unsubscribe func(), err error) {
	return a.SubscribeInternalPaced(filter, func(subject, reply, hdr, msg []byte) <-chan struct{} {
		h(subject, reply, hdr, msg)
		return nil
	})
}

// PacedHandler is a MsgHandler that may ask the publisher to pause: it
// returns nil, or a channel closed once what it queued has drained
// enough. A client's read loop then waits on it before it reads more, so
// TCP slows the sender to the pace of the work it causes; the server's
// own publishers never wait. The channel must be closed eventually
// whatever the publisher does: nothing it waits for may wait for a
// client's read loop.
type PacedHandler = func(subject, reply, hdr, msg []byte) <-chan struct{}

// SubscribeInternalPaced is SubscribeInternal with a PacedHandler: a
// stream capturing its subjects throttles its publishers this way.
func (a *Account) SubscribeInternalPaced(filter string, h PacedHandler) (unsubscribe func(), err error) {
	sub := &subscription{acc: a, subject: []byte(filter), handler: h}
	if err := a.insertSub(filter, "", sub); err != nil {
		return nil, fmt.Errorf("internal subscription %q: %w", filter, err)
	}
	a.internal.Add(1)
	return sub.unsubscribe, nil
}

// Publish sends a message from the server itself into the account (API
// replies, acknowledgements, advisories). hdr may be nil.
func (a *Account) Publish(subj, reply string, hdr, msg []byte) {
	a.Deliver(subj, subj, reply, hdr, msg)
}

// Deliver routes a message by the subject to while presenting it with
// subject subj: JetStream hands a stored message to a consumer's inbox or
// deliver subject, and the client sees the subject it was published on.
func (a *Account) Deliver(to, subj, reply string, hdr, msg []byte) {
	s := senderPool.Get().(*sender)
	s.srv = a.srv
	r := a.subs.MatchOnce([]byte(to))
	if !r.Empty() {
		hdrLen, body := -1, msg
		if hdr != nil {
			hdrLen = len(hdr)
			body = make([]byte, 0, len(hdr)+len(msg))
			body = append(append(body, hdr...), msg...)
		}
		if to != subj {
			s.links.deliverTo = []byte(to) // stream imports map the deliver subject
		}
		s.deliverAll(r, true, []byte(subj), []byte(reply), hdrLen, body)
		s.links = linkCtx{}
		// The server's own publishers never stall on a slow subscriber
		// or queued work: they serve every account, the subscriber is
		// cut off at max_pending anyway, and a stream refuses what it
		// has no room for.
		s.stall = nil
		s.wakePending()
	}
	s.srv = nil
	senderPool.Put(s)
}

// HasInterest reports whether anyone in the account subscribes to subj:
// push consumers deliver only while their deliver subject has interest.
func (a *Account) HasInterest(subj string) bool {
	b := []byte(subj)
	return anyInterest(a.subs.MatchOnce(b), b, 0)
}

// WatchInterest calls fn (which must not block) whenever a client
// subscribes to a filter that matches the literal subject subj: a push
// consumer waits for its deliver subject to gain interest. The returned
// function stops watching.
func (a *Account) WatchInterest(subj string, fn func()) (cancel func()) {
	w := &interestWatch{subject: subj, fn: fn}
	a.watchMu.Lock()
	a.watches = append(a.watches, w)
	a.watchMu.Unlock()
	return func() {
		a.watchMu.Lock()
		defer a.watchMu.Unlock()
		for i, x := range a.watches {
			if x == w {
				a.watches = append(a.watches[:i], a.watches[i+1:]...)
				return
			}
		}
	}
}

type interestWatch struct {
	subject string
	fn      func()
}

// notifyInterest tells watchers a client subscribed to filter.
func (a *Account) notifyInterest(filter string) {
	a.watchMu.Lock()
	var fns []func()
	for _, w := range a.watches {
		if subject.Matches(filter, w.subject) {
			fns = append(fns, w.fn)
		}
	}
	a.watchMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
