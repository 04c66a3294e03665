package jetstream

import (
	"sync"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// Accounts on a cluster.
//
// In operator mode a node registers an account with JetStream only when
// the server loads it (a client connects, a claim update arrives, a JWT
// is stored from before). On a cluster the node that must create a
// stream, answer for it, or lead its partition may have no client of the
// account. The engine then asks for the account (Options.LoadAccount),
// and the meta entries it could not serve wait for the registration
// instead of being lost:
//
//   - every node asks for every account the catalog names, so whichever
//     node leads a partition or the meta group later can serve it;
//   - an applied entry for a stream this node holds, of an account not
//     registered here, waits (in log order) and runs once the account
//     registers; so does a catalog stream a newly led partition lacks;
//   - streams read for a newly led partition wait in the engine's hold,
//     which registration attaches (adopt, enableLocked).

// maxWaiting bounds the meta entries one account keeps while it is not
// registered. Past it the oldest go: their requesters have timed out
// long since, and a create without a request is materialized again when
// the partition is next taken.
const maxWaiting = 1024

// accountWaits is what the cluster keeps for accounts it asked for.
type accountWaits struct {
	mu sync.Mutex
	// waiting holds, by account, the meta entries to run once it
	// registers, in the order they were applied. Guarded by mu.
	waiting map[string][]*metaEntry
	// loading names the accounts with a LoadAccount call in flight.
	// Guarded by mu.
	loading map[string]bool
	// draining names the accounts whose waiting entries are being run,
	// so one goroutine runs them, in order. Guarded by mu.
	draining map[string]bool
}

// needAccount asks for account to be loaded and, when ent is not nil,
// keeps ent to run once it registers.
//
// An entry kept after the registration's own drain looked (the account
// registered between the caller's look and this) is drained here: the
// registration is visible once ent is queued, so every entry is run by
// one of the two.
func (c *clusterState) needAccount(account string, ent *metaEntry) {
	w := &c.accts
	w.mu.Lock()
	if w.waiting == nil {
		w.waiting, w.loading, w.draining = map[string][]*metaEntry{}, map[string]bool{}, map[string]bool{}
	}
	if ent != nil {
		q := append(w.waiting[account], ent)
		if len(q) > maxWaiting {
			q = q[len(q)-maxWaiting:]
		}
		w.waiting[account] = q
	}
	load := c.e.opts.LoadAccount
	start := load != nil && !w.loading[account]
	if start {
		w.loading[account] = true
	}
	w.mu.Unlock()
	if a := c.e.account(account); a != nil {
		if start {
			w.mu.Lock()
			delete(w.loading, account)
			w.mu.Unlock()
		}
		if ent != nil {
			go c.accountRegistered(a)
		}
		return
	}
	if !start {
		return
	}
	// Off the caller's goroutine (raft's apply loop, a leadership worker):
	// a load may wait on a resolver.
	go func() {
		load(account)
		w.mu.Lock()
		delete(w.loading, account)
		w.mu.Unlock()
	}()
}

// hasWaiting reports whether account has entries waiting; a newer entry
// must then wait behind them, to run in log order.
func (c *clusterState) hasWaiting(account string) bool {
	c.accts.mu.Lock()
	defer c.accts.mu.Unlock()
	return len(c.accts.waiting[account]) > 0
}

// loadCatalogAccounts asks for every account the catalog names that is
// not registered here.
func (c *clusterState) loadCatalogAccounts() {
	for _, name := range c.catalog.accountNames() {
		if c.e.account(name) == nil {
			c.needAccount(name, nil)
		}
	}
}

// accountRegistered runs the entries that waited for a, which has just
// registered, in the order they were applied.
func (c *clusterState) accountRegistered(a *jsAccount) {
	name := a.acc.Name()
	w := &c.accts
	w.mu.Lock()
	if w.draining == nil || w.draining[name] || len(w.waiting[name]) == 0 {
		w.mu.Unlock()
		return
	}
	w.draining[name] = true
	for len(w.waiting[name]) > 0 {
		ent := w.waiting[name][0]
		w.waiting[name] = w.waiting[name][1:]
		w.mu.Unlock()
		c.runEntry(a, ent)
		w.mu.Lock()
	}
	delete(w.waiting, name)
	delete(w.draining, name)
	w.mu.Unlock()
}

// runEntry does on this node what an applied meta entry asks of the node
// holding its stream: the request it carries is served (and answered), or
// a create without one is materialized. An entry whose stream this node
// no longer holds is the new holder's; a create whose stream was deleted
// or replaced meanwhile is dropped.
func (c *clusterState) runEntry(a *jsAccount, ent *metaEntry) {
	asg := ent.Asg
	if !c.holds(asg) {
		return
	}
	if ent.Op == metaCreate || ent.Op == metaRequest {
		if cur := c.catalog.lookup(asg.Account, asg.Name); cur == nil || cur.ID != asg.ID {
			return
		}
	}
	if ent.Subject == "" {
		if ent.Op == metaCreate {
			c.materialize(asg)
		}
		return
	}
	req := apiRequest{a: a, subject: ent.Subject, reply: ent.Reply, body: ent.Body, asg: asg}
	if !c.e.apiSched.submit(&a.lane, req, true) {
		a.reply(req.reply, &api.Response{Type: api.TypeSystemOverloaded, Error: api.NewInsufficientResourcesError()})
	}
}

// checkTierLimits holds a stream create (have nil) or update to the
// account's limits against the whole catalog, as nats-server's meta
// leader does before proposing: the node that will hold the stream sees
// only its own streams. In nats-server's order: a tier must apply
// (10120), the tier's stream count (10027, creates only), the stream's
// max_consumers (10026), then its max_bytes beside every max_bytes the
// tier's other streams of that storage type reserve (10047 file, 10028
// memory). Bytes held by streams without max_bytes are checked where
// they are held, on publish.
func (c *clusterState) checkTierLimits(a *jsAccount, cfg *api.StreamConfig, have *assignment) *api.Error {
	lim := a.limits.Load()
	if lim == nil {
		return nil
	}
	tier, tl, ok := lim.selectTier(cfg.Replicas)
	if !ok {
		return api.NewNoLimitsError()
	}
	var streams int
	var reserved int64
	c.catalog.each(a.acc.Name(), func(other *assignment) {
		if other.Name == cfg.Name || !inTier(tier, other.Config.Replicas) {
			return
		}
		streams++
		if oc := other.Config; oc.MaxBytes > 0 && oc.Storage == cfg.Storage {
			reserved = satAdd(reserved, oc.MaxBytes*replicaFactor(tier, oc.Replicas))
		}
	})
	if have == nil && tl.MaxStreams > 0 && streams >= tl.MaxStreams {
		return api.NewMaxStreamsReachedError()
	}
	if cfg.MaxConsumers > 0 && tl.MaxConsumers > 0 && cfg.MaxConsumers > tl.MaxConsumers {
		return api.NewMaxConsumersReachedError()
	}
	capacity := storageCap(tl, cfg.Storage)
	if capacity < 0 {
		return nil
	}
	if have != nil && have.Config.Storage == cfg.Storage && cfg.MaxBytes <= max(have.Config.MaxBytes, 0) {
		return nil // an update that does not grow its reservation
	}
	want := max(cfg.MaxBytes, 1) * replicaFactor(tier, cfg.Replicas)
	if reserved > capacity || want > capacity-reserved {
		return resourcesExceeded(cfg.Storage)
	}
	return nil
}

// satAdd adds without overflowing: reservations come from configs
// clients choose.
func satAdd(x, y int64) int64 {
	if s := x + y; s >= x {
		return s
	}
	return 1<<63 - 1
}

// accountUsages is the account's usage across the cluster, for its
// account info: every stream in the catalog, each with the state this
// node's store holds of it (its own, where this node holds the stream;
// a replica's for a replicated stream led elsewhere; none for an R1
// stream on another node). As nats-server reports a cluster's usage,
// every replica's bytes count.
func (c *clusterState) accountUsages(a *jsAccount) []streamUsage {
	asgs := c.catalog.streams(a.acc.Name())
	out := make([]streamUsage, 0, len(asgs))
	for _, asg := range asgs {
		var u streamUsage
		if s := a.lookup(asg.Name); s != nil {
			u = usageOf(s)
		} else {
			cfg := asg.Config
			u = streamUsage{replicas: max(cfg.Replicas, 1), storage: cfg.Storage, name: cfg.Name,
				created: asg.Created, cfg: cfg}
			if cfg.MaxBytes > 0 {
				u.reserved = uint64(cfg.MaxBytes)
			}
			if st, err := c.e.opts.Store.LoadStream(asg.ID); err == nil && asg.group() != 0 {
				u.msgs, u.bytes = st.State.Msgs, st.State.Bytes
				_ = c.e.opts.Store.Consumers(asg.ID, func(store.ConsumerRecord) error {
					u.consumers++
					return nil
				})
			}
		}
		u.bytes *= uint64(u.replicas)
		out = append(out, u)
	}
	return out
}
