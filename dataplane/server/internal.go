package server

import (
	"fmt"
	"slices"

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
	return a.SubscribeInternalPaced(filter, func(subject, reply, hdr, msg []byte, _ bool) <-chan struct{} {
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
//
// routed says the message crossed a route from a peer that honours PAUSE:
// nothing waits here (a route's reader serves every account), the peer's
// publishers are paused instead, and what they sent meanwhile, up to a
// round trip's worth, is still to come.
type PacedHandler = func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{}

// SubscribeInternalPaced is SubscribeInternal with a PacedHandler: a
// stream capturing its subjects throttles its publishers this way.
func (a *Account) SubscribeInternalPaced(filter string, h PacedHandler) (unsubscribe func(), err error) {
	sub := &subscription{acc: a, subject: []byte(filter), handler: h}
	if err := a.insertSub(filter, "", sub); err != nil {
		return nil, fmt.Errorf("internal subscription %q: %w", filter, err)
	}
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
	a.deliver(s, a.subs.MatchOnceInto([]byte(to), &s.match), to, nil, subj, reply, hdr, msg)
}

// Route is a handle for delivering to one subject again and again, as a
// JetStream consumer delivers message after message to one pull
// request's inbox or to its deliver subject: it remembers whom the
// subject reaches while the account's subscriptions stay as they are.
// Safe for concurrent use. An alias of an unnamed interface, so the
// JetStream engine's seam can name the same type without importing
// this package.
type Route = interface {
	// Deliver is Account.Deliver to the route's subject.
	Deliver(subj, reply string, hdr, msg []byte)
	// HasInterest is Account.HasInterest for the route's subject.
	HasInterest() bool
}

// Route returns a Route to the literal subject to.
func (a *Account) Route(to string) Route { return &subjectRoute{a: a, to: to, toB: []byte(to)} }

type subjectRoute struct {
	a    *Account
	to   string
	toB  []byte // to, converted once; never modified
	memo subject.Memo[*subscription]
}

func (r *subjectRoute) Deliver(subj, reply string, hdr, msg []byte) {
	r.a.deliver(senderPool.Get().(*sender), r.match(), r.to, r.toB, subj, reply, hdr, msg)
}

func (r *subjectRoute) HasInterest() bool {
	return anyInterest(r.match(), r.toB, 0)
}

func (r *subjectRoute) match() *subject.Result[*subscription] {
	return r.a.subs.MatchMemo(r.toB, &r.memo)
}

// deliver hands a message to r, what to matches (see Deliver), through
// s, a sender from senderPool, which it puts back; toB is to as bytes,
// or nil.
func (a *Account) deliver(s *sender, r *subject.Result[*subscription], to string, toB []byte, subj, reply string, hdr, msg []byte) {
	s.srv = a.srv
	if !r.Empty() {
		// The byte forms go in the sender's scratch, reused from message
		// to message: whatever is delivered copies what it keeps.
		s.scratch = slices.Grow(s.scratch[:0], len(to)+len(subj)+len(reply)+len(hdr)+len(msg))
		hdrLen, body := -1, msg
		if hdr != nil {
			hdrLen = len(hdr)
			at := len(s.scratch)
			s.scratch = append(append(s.scratch, hdr...), msg...)
			body = s.scratch[at:len(s.scratch):len(s.scratch)]
		}
		if to != subj {
			// Stream imports map the deliver subject.
			if toB == nil {
				toB = s.scratchString(to)
			}
			s.links.deliverTo = toB
		}
		s.deliverAll(r, true, s.scratchString(subj), s.scratchString(reply), hdrLen, body)
		s.links = linkCtx{}
		// The server's own publishers never stall on a slow subscriber
		// or queued work: they serve every account, the subscriber is
		// cut off at max_pending anyway, and a stream refuses what it
		// has no room for.
		s.stall = nil
		s.wakePending()
		if cap(s.scratch) > maxScratch {
			s.scratch = nil // a large message's room does not stay pooled
		}
	}
	s.srv = nil
	s.match.Reset()
	senderPool.Put(s)
}

// maxScratch is the most a pooled sender keeps of its scratch.
const maxScratch = 64 << 10

// scratchString appends v to the scratch and returns its bytes there.
func (s *sender) scratchString(v string) []byte {
	at := len(s.scratch)
	s.scratch = append(s.scratch, v...)
	return s.scratch[at:len(s.scratch):len(s.scratch)]
}

// HasInterest reports whether anyone in the account subscribes to subj:
// push consumers deliver only while their deliver subject has interest.
func (a *Account) HasInterest(subj string) bool {
	b := []byte(subj)
	return anyInterest(a.subs.MatchOnce(b), b, 0)
}

// HasSubscriber reports whether anyone subscribes to the literal subj
// itself, not through a wildcard matching it: a backup's receiver
// subscribes to its own inbox, which its client's wildcard response
// subscription matches too, and only the receiver's own says it is
// ready for the chunks.
func (a *Account) HasSubscriber(subj string) bool {
	b := []byte(subj)
	return anySub(a.subs.MatchOnce(b), func(sub *subscription) bool {
		return string(sub.subject) == subj && sub.reaches(b, 0)
	})
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
