package server

import "github.com/contrail/contrail/dataplane/subject"

// Interest across imports. An import keeps a forwarding subscription in
// the account messages cross from (a stream import in the exporter, a
// service import in the importer) whether or not anyone waits on the
// other side. Interest questions look through it: a subject has interest
// when a message on it would reach a client or internal subscriber here,
// or on the far side of an import. So a request that only an idle import
// would take gets the 503 no-responders status, and a push consumer whose
// deliver subject is exported waits for a subscriber in the importer.

// interested is the part of a forwarder interest questions ask.
type interested interface {
	// interest reports whether a message on subj would reach a
	// subscriber through the forwarder; depth counts the crossings.
	interest(subj []byte, depth int) bool
}

// anyInterest reports whether a message on subj matched as r would reach
// a subscriber.
func anyInterest(r *subject.Result[*subscription], subj []byte, depth int) bool {
	return anySub(r, func(sub *subscription) bool { return sub.reaches(subj, depth) })
}

// anySub reports whether any subscription of r, plain or queue member,
// satisfies ok.
func anySub(r *subject.Result[*subscription], ok func(*subscription) bool) bool {
	for _, sub := range r.Plain {
		if ok(sub) {
			return true
		}
	}
	for _, members := range r.Queues {
		for _, sub := range members {
			if ok(sub) {
				return true
			}
		}
	}
	return false
}

// reaches reports whether a message on subj delivered to sub arrives
// somewhere: a subscriber always, a forwarder when its far side has one.
func (sub *subscription) reaches(subj []byte, depth int) bool {
	if sub.fwd == nil {
		return true
	}
	if depth >= maxLinkDepth {
		return false
	}
	return sub.fwd.interest(subj, depth+1)
}

// interest of a stream import: a subscriber in the importer on the
// mapped subject. Streams do not chain, so only subscribers count.
func (l *streamLink) interest(subj []byte, _ int) bool {
	local := l.m.apply(subj)
	if local == nil {
		return false
	}
	return anySub(l.importer.subs.MatchOnce(local), func(sub *subscription) bool { return sub.fwd == nil })
}

// interest of a service import: a responder in the exporter on the
// exported subject, possibly through a further service import.
func (l *serviceLink) interest(subj []byte, depth int) bool {
	to := l.m.apply(subj)
	if to == nil {
		return false
	}
	return anySub(l.exporter.subs.MatchOnce(to), func(sub *subscription) bool {
		return sub.fwd == nil || (!sub.fwd.stream() && sub.reaches(to, depth))
	})
}

// interest of a response route: a requester is waiting while the route
// exists.
func (t *respTable) interest([]byte, int) bool { return true }
