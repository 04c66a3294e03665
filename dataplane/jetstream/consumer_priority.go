package jetstream

import (
	"slices"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Priority groups (ADR-42) decide which waiting pull request a consumer
// serves: overflow serves a request only once the consumer is backed up
// past the request's min_pending / min_ack_pending; pinned_client serves
// one client at a time, named by a pin id the server hands out in the
// Nats-Pin-Id header; prioritized serves the lowest priority number first.

// checkPriority validates a pull request's priority terms against the
// consumer, returning the status line to answer with ("" if acceptable).
// Called with c.mu held.
func (c *consumer) checkPriorityLocked(pg *api.PriorityGroup, now time.Time) string {
	cfg := c.mu.cfg
	if cfg.PriorityPolicy == api.PriorityNone {
		return ""
	}
	switch {
	case pg.ID != "" && cfg.PriorityPolicy != api.PriorityPinnedClient:
		return "400 Bad Request - Not a Pinned Client Priority consumer"
	case pg.Priority < 0 || pg.Priority > 9:
		return "400 Bad Request - Priority must be between 0 and 9"
	case pg.Group == "":
		return "400 Bad Request - Priority Group missing"
	case !slices.Contains(cfg.PriorityGroups, pg.Group):
		return "400 Bad Request - Invalid Priority Group"
	}
	if c.mu.pinID != "" && pg.ID != "" {
		if pg.ID != c.mu.pinID {
			return "423 Nats-Pin-Id mismatch"
		}
		c.mu.pinnedAt = now // the pinned client is alive
	}
	return ""
}

// pickRequestLocked chooses the waiting request to serve next, or nil.
func (c *consumer) pickRequestLocked(now time.Time) *pullRequest {
	w := c.mu.waiting
	switch c.mu.cfg.PriorityPolicy {
	case api.PriorityOverflow:
		for _, r := range w {
			if r.minPending == 0 && r.minAckPending == 0 ||
				r.minPending > 0 && int64(c.numPending()) >= r.minPending ||
				r.minAckPending > 0 && int64(len(c.mu.pending)) >= r.minAckPending {
				return r
			}
		}
		return nil
	case api.PriorityPinnedClient:
		if c.mu.pinID == "" {
			for _, r := range w {
				if r.pinID == "" {
					c.pinLocked(r, now)
					return r
				}
			}
			return nil
		}
		for _, r := range w {
			if r.pinID == c.mu.pinID {
				return r
			}
		}
		return nil
	case api.PriorityPrioritized:
		var best *pullRequest
		for _, r := range w {
			if best == nil || r.priority < best.priority {
				best = r
			}
		}
		return best
	}
	return w[0]
}

// pinLocked pins a new client of group: the next request without a pin id
// takes it, and every delivery to it carries the id.
func (c *consumer) pinLocked(r *pullRequest, now time.Time) {
	c.mu.pinID, c.mu.pinGroup, c.mu.pinnedAt = randomName()+randomName()+randomName(), r.group, now
	r.pinID = c.mu.pinID
	c.priorityAdvisory("PINNED", "io.nats.jetstream.advisory.v1.consumer_group_pinned", r.group, c.mu.pinID)
}

// unpinLocked releases the pin; waiting requests still naming the old id
// hear 423 so their clients start over without it.
func (c *consumer) unpinLocked(out *[]outMsg, reason string) {
	if c.mu.pinID == "" {
		return
	}
	old, group := c.mu.pinID, c.mu.pinGroup
	c.mu.pinID, c.mu.pinGroup = "", ""
	kept := c.mu.waiting[:0]
	for _, r := range c.mu.waiting {
		if r.pinID == old {
			*out = append(*out, outMsg{to: r.reply, hdr: statusWithPending("423 Nats-Wrong-Pin-Id", r.batch-r.n, max(r.maxBytes-r.b, 0))})
			continue
		}
		kept = append(kept, r)
	}
	clear(c.mu.waiting[len(kept):])
	c.mu.waiting = kept
	c.priorityAdvisory("UNPINNED", "io.nats.jetstream.advisory.v1.consumer_group_unpinned", group, reason)
}

// pinExpiryLocked unpins a client that stopped pulling for priority_timeout.
func (c *consumer) pinExpiryLocked(now time.Time, out *[]outMsg, consider func(time.Time)) {
	ttl := c.mu.cfg.PinnedTTL
	if c.mu.pinID == "" || ttl <= 0 {
		return
	}
	deadline := c.mu.pinnedAt.Add(ttl)
	if now.Before(deadline) {
		consider(deadline)
		return
	}
	c.unpinLocked(out, "timeout")
}

// priorityGroupsLocked reports the groups' pin state for consumer info.
func (c *consumer) priorityGroupsLocked() []api.PriorityGroupState {
	if c.mu.cfg.PriorityPolicy == api.PriorityNone {
		return nil
	}
	var out []api.PriorityGroupState
	for _, g := range c.mu.cfg.PriorityGroups {
		st := api.PriorityGroupState{Group: g}
		if c.mu.pinID != "" && c.mu.pinGroup == g {
			st.PinnedClientID, st.PinnedTS = c.mu.pinID, c.mu.pinnedAt.UTC()
		}
		out = append(out, st)
	}
	return out
}

// priorityAdvisory tells the account about a pin change.
func (c *consumer) priorityAdvisory(kind, typ, group, detail string) {
	adv := map[string]any{"type": typ, "id": randomName() + randomName(), "timestamp": time.Now().UTC(),
		"account": c.a.acc.Name(), "stream": c.stream, "consumer": c.name, "group": group}
	if kind == "PINNED" {
		adv["pinned_id"] = detail
	} else {
		adv["reason"] = detail
	}
	go c.a.advise("$JS.EVENT.ADVISORY.CONSUMER."+kind+"."+c.stream+"."+c.name, adv)
}

// consumerUnpin serves CONSUMER.UNPIN.<stream>.<consumer>.
func (a *jsAccount) consumerUnpin(req apiRequest, rest string) any {
	const typ = api.TypeConsumerUnpinResponse
	var ureq api.ConsumerUnpinRequest
	if err := decode(req.body, &ureq); err != nil {
		return &api.Response{Type: typ, Error: err}
	}
	c, aerr := a.consumerFor(rest)
	if aerr != nil {
		return &api.Response{Type: typ, Error: aerr}
	}
	var out []outMsg
	c.mu.Lock()
	cfg := c.mu.cfg
	if cfg.PriorityPolicy != api.PriorityPinnedClient || !slices.Contains(cfg.PriorityGroups, ureq.Group) {
		c.mu.Unlock()
		return &api.Response{Type: typ, Error: api.NewConsumerInvalidPriorityGroupError()}
	}
	if c.mu.pinGroup == ureq.Group {
		c.unpinLocked(&out, "admin")
	}
	c.mu.Unlock()
	c.send(out)
	c.wake()
	return &api.Response{Type: typ}
}
