package server

import (
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// permissions is one user's publish and subscribe rights, from its JWT.
// Lists are short (a handful of subjects), so checks scan them; publish
// answers are cached per subject because a client publishes to few
// subjects many times.
//
// Invariant: deny beats allow, and an empty allow list allows everything
// not denied, as in nats-server.
type permissions struct {
	pubAllow, pubDeny []string
	subAllow, subDeny []string
	pubAllowAll       bool // no publish allow list
	subAllowAll       bool // no subscribe allow list
	resp              *jwt.ResponsePermission

	mu struct {
		sync.Mutex
		cache   map[string]bool      // publish decisions; guarded by mu
		replies map[string]*respGate // reply subjects open to this client; guarded by mu
	}
}

// respGate is a reply subject a client may publish to because it received
// a request on it: allow_responses in the user JWT.
type respGate struct {
	left    int // messages still allowed; <= 0 with max 0 means one
	expires time.Time
}

// pubCacheMax bounds the publish decision cache; it is cleared when full.
const pubCacheMax = 256

// newPermissions compiles a user's JWT permissions; nil when the user may
// do anything.
func newPermissions(p jwt.Permissions) *permissions {
	if len(p.Pub.Allow) == 0 && len(p.Pub.Deny) == 0 && len(p.Sub.Allow) == 0 && len(p.Sub.Deny) == 0 && p.Resp == nil {
		return nil
	}
	pp := &permissions{
		pubAllow: p.Pub.Allow, pubDeny: p.Pub.Deny,
		subAllow: p.Sub.Allow, subDeny: p.Sub.Deny,
		pubAllowAll: len(p.Pub.Allow) == 0,
		subAllowAll: len(p.Sub.Allow) == 0,
		resp:        p.Resp,
	}
	if pp.resp != nil && pp.pubAllowAll {
		// allow_responses with no publish allow list means: publish only
		// replies, as nats-server reads it.
		pp.pubAllowAll = false
	}
	pp.mu.cache = map[string]bool{}
	pp.mu.replies = map[string]*respGate{}
	return pp
}

// canPublish reports whether the user may publish to the literal subj.
func (p *permissions) canPublish(subj string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok, hit := p.mu.cache[subj]
	if !hit {
		ok = p.pubAllowed(subj)
		if len(p.mu.cache) >= pubCacheMax {
			clear(p.mu.cache)
		}
		p.mu.cache[subj] = ok
	}
	if ok {
		return true
	}
	return p.useReplyLocked(subj, now)
}

func (p *permissions) pubAllowed(subj string) bool {
	for _, d := range p.pubDeny {
		if subject.Matches(filterOf(d), subj) {
			return false
		}
	}
	if p.pubAllowAll {
		return true
	}
	for _, a := range p.pubAllow {
		if subject.Matches(filterOf(a), subj) {
			return true
		}
	}
	return false
}

// canSubscribe reports whether the user may subscribe to filter (in
// queue, if not empty): the filter must lie within an allowed subject and
// not within a denied one. A filter that merely overlaps a denied subject
// is allowed; deliverDenied keeps the denied messages from it.
func (p *permissions) canSubscribe(filter, queue string) bool {
	for _, d := range p.subDeny {
		f, q := splitQueuePerm(d)
		if (q == "" || q == queue) && subject.SubsetOf(filter, f) {
			return false
		}
	}
	if p.subAllowAll {
		return true
	}
	for _, a := range p.subAllow {
		f, q := splitQueuePerm(a)
		if (q == "" || q == queue) && subject.SubsetOf(filter, f) {
			return true
		}
	}
	return false
}

// deliverDenied reports whether a message on subj must be kept from the
// user because its subscription overlaps a denied subject.
func (p *permissions) deliverDenied(subj string) bool {
	for _, d := range p.subDeny {
		if f, q := splitQueuePerm(d); q == "" && subject.Matches(f, subj) {
			return true
		}
	}
	return false
}

// hasSubDeny reports whether deliveries need deliverDenied at all.
func (p *permissions) hasSubDeny() bool { return p != nil && len(p.subDeny) > 0 }

// openReply records that the client received a request with reply
// subject reply, which allow_responses lets it answer.
func (p *permissions) openReply(reply string, now time.Time) {
	if p.resp == nil || reply == "" {
		return
	}
	max := p.resp.MaxMsgs
	if max <= 0 {
		max = 1
	}
	ttl := p.resp.Expires
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.replies) > 4096 {
		for k, g := range p.mu.replies {
			if now.After(g.expires) {
				delete(p.mu.replies, k)
			}
		}
	}
	p.mu.replies[reply] = &respGate{left: max, expires: now.Add(ttl)}
}

func (p *permissions) useReplyLocked(subj string, now time.Time) bool {
	g, ok := p.mu.replies[subj]
	if !ok {
		return false
	}
	if now.After(g.expires) {
		delete(p.mu.replies, subj)
		return false
	}
	g.left--
	if g.left <= 0 {
		delete(p.mu.replies, subj)
	}
	return true
}

// filterOf drops a queue part from a permission subject ("foo.* q").
func filterOf(s string) string {
	f, _ := splitQueuePerm(s)
	return f
}

// splitQueuePerm splits "subject queue" permission entries, which scope a
// subscribe permission to one queue group.
func splitQueuePerm(s string) (filter, queue string) {
	f, q, _ := strings.Cut(strings.TrimSpace(s), " ")
	return f, strings.TrimSpace(q)
}
