package jetstream

// account is the registered account named name, or nil.
func (e *Engine) account(name string) *jsAccount {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.accounts[name]
}

// adopt hands streams read from a partition this node now leads to their
// accounts: attached at once where the account is registered and enabled,
// held for it otherwise (as start-up holds streams).
func (e *Engine) adopt(streams []*stream) {
	for _, s := range streams {
		e.track(s)
		a := e.account(s.account)
		if a != nil {
			a.create.Lock()
			if a.enabled.Load() {
				err := a.attach(s)
				a.create.Unlock()
				if err != nil {
					e.log.Error("jetstream: partition stream not attached", "stream", s.config().Name, "err", err)
				}
				continue
			}
			a.create.Unlock()
		}
		e.mu.Lock()
		e.mu.held[s.account] = append(e.mu.held[s.account], s)
		e.mu.Unlock()
	}
}

// dropStreamsOf takes every stream using ap (a partition's applier whose
// leadership term ended) off this node: out of its account or the hold,
// not capturing, its consumers stopped without writing (the partition's
// new leader owns their state now), its reservations released.
func (e *Engine) dropStreamsOf(ap *applier) {
	e.mu.Lock()
	var mine []*stream
	for name, held := range e.mu.held {
		kept := held[:0]
		for _, s := range held {
			if s.ap == ap {
				mine = append(mine, s)
			} else {
				kept = append(kept, s)
			}
		}
		e.mu.held[name] = kept
	}
	accounts := make([]*jsAccount, 0, len(e.mu.accounts))
	for _, a := range e.mu.accounts {
		accounts = append(accounts, a)
	}
	e.mu.Unlock()
	for _, a := range accounts {
		a.create.Lock()
		for _, s := range a.sortedStreams() {
			if s.ap == ap {
				a.forget(s)
				mine = append(mine, s)
			}
		}
		a.create.Unlock()
	}
	for _, s := range mine {
		s.detach()
		s.mu.Lock()
		s.mu.detached = true
		s.mu.removed = true // nothing applies to this copy any more
		if s.mu.timer != nil {
			s.mu.timer.Stop()
		}
		s.mu.timerAt = 0
		cons := s.consumersLocked()
		s.commitLocked(-1)
		s.mu.Unlock()
		for _, c := range cons {
			c.retire()
			c.leadershipLost()
			c.stop()
		}
		e.untrack(s)
	}
}

// dropOrphans removes from streams, read from partition g as this node
// takes it, those the catalog deleted while no leader of g could: their
// delete entry applied when no node served the partition, or the
// previous leader's removal never committed. Left loaded, such a stream
// would capture its subjects unseen by the catalog. Each is removed
// through the partition's log, so every copy drops it.
//
// A stream is an orphan only if its id is at most the highest id the
// catalog here has assigned in g: ids are assigned in meta log order and
// never reused, so such a stream's create entry was applied here, and
// its absence means a later delete. A higher id is a create this node's
// catalog has not applied yet, and stays.
func (c *clusterState) dropOrphans(g uint16, streams []*stream) []*stream {
	last := c.catalog.lastID(g)
	kept := streams[:0]
	for _, s := range streams {
		name := s.config().Name
		if cur := c.catalog.lookup(s.account, name); s.id > last || cur != nil && cur.ID == s.id {
			kept = append(kept, s)
			continue
		}
		r := s.ap.apply(&proposal{s: s, kind: propRemove})
		c.e.log.Info("jetstream: stream the catalog deleted removed from its partition",
			"group", g, "account", s.account, "stream", name, "id", s.id, "err", r.err)
	}
	return kept
}
