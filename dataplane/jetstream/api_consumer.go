package jetstream

import (
	"crypto/rand"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// consumerRoutes extend apiRoutes with the consumer API.
func init() {
	consumerFail := func(typ string) func(*api.Error) any {
		return func(err *api.Error) any { return consumerErr(typ, err) }
	}
	apiRoutes["CONSUMER.CREATE"] = apiRoute{(*jsAccount).consumerCreate, consumerFail(api.TypeConsumerCreateResponse)}
	apiRoutes["CONSUMER.DURABLE.CREATE"] = apiRoute{(*jsAccount).consumerDurableCreate, consumerFail(api.TypeConsumerCreateResponse)}
	apiRoutes["CONSUMER.INFO"] = apiRoute{(*jsAccount).consumerInfo, consumerFail(api.TypeConsumerInfoResponse)}
	apiRoutes["CONSUMER.DELETE"] = apiRoute{(*jsAccount).consumerDelete, func(err *api.Error) any {
		return &api.SuccessResponse{Response: api.Response{Type: api.TypeConsumerDeleteResponse, Error: err}}
	}}
	apiRoutes["CONSUMER.NAMES"] = apiRoute{(*jsAccount).consumerNames, func(err *api.Error) any {
		return &api.ConsumerNamesResponse{Response: api.Response{Type: api.TypeConsumerNamesResponse, Error: err}, Consumers: []string{}}
	}}
	apiRoutes["CONSUMER.LIST"] = apiRoute{(*jsAccount).consumerList, func(err *api.Error) any {
		return &api.ConsumerListResponse{Response: api.Response{Type: api.TypeConsumerListResponse, Error: err}, Consumers: []*api.ConsumerInfo{}}
	}}
	apiRoutes["CONSUMER.MSG.NEXT"] = apiRoute{(*jsAccount).consumerNext, nil}
	apiRoutes["CONSUMER.PAUSE"] = apiRoute{(*jsAccount).consumerPause, func(err *api.Error) any {
		return &api.ConsumerPauseResponse{Response: api.Response{Type: api.TypeConsumerPauseResponse, Error: err}}
	}}
	apiRoutes["CONSUMER.LEADER.STEPDOWN"] = apiRoute{(*jsAccount).consumerStepdown, failAs(api.TypeConsumerLeaderStepdownResponse)}
	apiRoutes["CONSUMER.UNPIN"] = apiRoute{(*jsAccount).consumerUnpin, failAs(api.TypeConsumerUnpinResponse)}
}

// randomName is an ephemeral consumer's name: 8 random base-62 characters.
func randomName() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [8]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

func consumerErr(typ string, err *api.Error) *api.ConsumerInfoResponse {
	return &api.ConsumerInfoResponse{Response: api.Response{Type: typ, Error: err}}
}

// consumerCreate serves CONSUMER.CREATE.<stream>[.<name>[.<filter>]].
func (a *jsAccount) consumerCreate(req apiRequest, rest string) any {
	streamName, tail, _ := strings.Cut(rest, ".")
	name, filter, _ := strings.Cut(tail, ".")
	return a.createConsumer(req, streamName, name, filter, false)
}

// consumerDurableCreate serves the legacy CONSUMER.DURABLE.CREATE.<stream>.<durable>.
func (a *jsAccount) consumerDurableCreate(req apiRequest, rest string) any {
	streamName, name, _ := strings.Cut(rest, ".")
	return a.createConsumer(req, streamName, name, "", true)
}

func (a *jsAccount) createConsumer(req apiRequest, streamName, name, filter string, legacyDurable bool) any {
	const typ = api.TypeConsumerCreateResponse
	var creq api.ConsumerCreateRequest
	if err := api.DecodeRequest(req.body, &creq); err != nil {
		return consumerErr(typ, api.NewInvalidJSONError(err))
	}
	if creq.Stream != streamName {
		return consumerErr(typ, api.NewStreamNameMismatchError())
	}
	cfg := &creq.Config
	// The name in the subject rules, as on nats-server: a durable name
	// must agree with it, a config name is replaced by it.
	if strings.ContainsAny(name, `\/`) {
		return consumerErr(typ, api.NewConsumerNameContainsPathSeparatorsError())
	}
	switch {
	case legacyDurable:
		switch {
		case name == "" || strings.Contains(name, "."):
			return consumerErr(typ, api.NewConsumerDurableNameNotInSubjectError())
		case cfg.Durable == "":
			return consumerErr(typ, api.NewConsumerDurableNameNotSetError())
		case cfg.Durable != name:
			return consumerErr(typ, api.NewConsumerDurableNameNotMatchSubjectError())
		}
		cfg.Name = name
	case name != "":
		if cfg.Durable != "" && cfg.Durable != name {
			return consumerErr(typ, api.NewConsumerDurableNameNotMatchSubjectError())
		}
		cfg.Name = name
		if filter != "" && len(cfg.FilterSubjects) > 0 {
			return consumerErr(typ, api.NewConsumerMultipleFiltersNotAllowedError())
		}
		if filter != "" && cfg.FilterSubject != filter {
			return consumerErr(typ, api.NewConsumerCreateFilterSubjectMismatchError())
		}
	case cfg.Durable != "":
		return consumerErr(typ, api.NewConsumerEphemeralWithDurableNameError())
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Durable
	}
	if cfg.PauseUntil != nil && cfg.PauseUntil.IsZero() {
		cfg.PauseUntil = nil
	}
	if cfg.Replicas > 1 {
		// A single node, as nats-server outside a cluster answers.
		return consumerErr(typ, api.NewReplicasNotSupportedError())
	}
	s := a.lookup(streamName)
	if s == nil {
		return consumerErr(typ, api.NewStreamNotFoundError())
	}
	// A mirror's or source's consumer (direct) learns the stream's
	// identity, and is refused when it expects another: the stream it
	// read was deleted and made again (source.go).
	var identity string
	if cfg.Direct || cfg.Sourcing {
		identity = api.StreamIdentity(s.created)
		if want := headerValue(req.hdr, api.HeaderStreamIdentity); len(want) > 0 && string(want) != identity {
			return consumerErr(typ, api.NewConsumerStreamIdentityMismatchError(identity))
		}
	}
	scfg := s.config()
	tierLim, aerr := a.consumerLimits(scfg.Replicas)
	if aerr != nil {
		return consumerErr(typ, aerr)
	}
	norm, aerr := cfg.Normalize(api.ConsumerEnv{Stream: scfg, Limits: tierLim, Pedantic: creq.Pedantic})
	if aerr != nil {
		return consumerErr(typ, aerr)
	}
	cname := norm.Name
	if cname == "" {
		// A legacy ephemeral: nats-server names it, but its config
		// keeps no name.
		cname = randomName()
	}
	norm.StampRequiredLevel()

	a.create.Lock()
	defer a.create.Unlock()
	if !a.enabled.Load() {
		return consumerErr(typ, api.NewNotEnabledForAccountError())
	}
	s.mu.Lock()
	existing := s.mu.cons[cname]
	var others []*api.ConsumerConfig
	for n, c := range s.mu.cons {
		if n != cname {
			others = append(others, c.config())
		}
	}
	s.mu.Unlock()
	var existingCfg *api.ConsumerConfig
	if existing != nil {
		existingCfg = existing.config()
	}
	if err := creq.Action.Check(existingCfg, norm); err != nil {
		return consumerErr(typ, err)
	}
	if existing != nil {
		bound := norm.DeliverSubject != "" && a.acc.HasInterest(existingCfg.DeliverSubject)
		if err := api.CheckConsumerUpdate(existingCfg, norm, bound); err != nil {
			return consumerErr(typ, err)
		}
		existing.update(norm)
		if s.keepsConsumer(norm) {
			// A change the store did not take is not made: the consumer
			// goes back to the config it has on disk.
			if r := s.ap.apply(&proposal{s: s, acct: a, kind: propConsumerCreate, cons: existing}); r.err != nil {
				existing.update(existingCfg)
				return consumerErr(typ, api.Prefer(r.err, api.NewConsumerCreateError(r.err)))
			}
		}
		return &api.ConsumerInfoResponse{Response: api.Response{Type: typ}, ConsumerInfo: existing.info()}
	}
	if maxc := maxConsumers(scfg, tierLim); maxc > 0 && len(others) >= maxc {
		return consumerErr(typ, api.NewMaxConsumersReachedError())
	}
	if err := api.CheckWorkQueue(scfg, norm, others); err != nil {
		return consumerErr(typ, err)
	}
	c := newConsumer(s, a, cname, norm, a.e.opts.Now().UTC())
	var startSeq uint64
	if norm.DeliverPolicy == api.DeliverByStartTime && norm.OptStartTime != nil {
		seq, err := s.firstAtOrAfter(unixNanos(*norm.OptStartTime))
		if err != nil {
			return consumerErr(typ, api.NewConsumerCreateError(err))
		}
		startSeq = seq
	}
	if err := c.position(s.snapshotState(), startSeq); err != nil {
		return consumerErr(typ, api.NewConsumerCreateError(err))
	}
	if s.keepsConsumer(norm) {
		if r := s.ap.apply(&proposal{s: s, acct: a, kind: propConsumerCreate, cons: c}); r.err != nil {
			return consumerErr(typ, api.Prefer(r.err, api.NewConsumerCreateError(r.err)))
		}
	}
	if err := a.startConsumer(c); err != nil {
		return consumerErr(typ, api.NewConsumerCreateError(err))
	}
	a.consumerAdvisory("CREATED", c, map[string]any{"type": "io.nats.jetstream.advisory.v1.consumer_action", "action": "create"})
	resp := &api.ConsumerInfoResponse{Response: api.Response{Type: typ}, ConsumerInfo: c.info()}
	if identity != "" {
		return withHeader{resp: resp, hdr: appendHeaderBlock(nil, "", api.HeaderStreamIdentity, identity)}
	}
	return resp
}

// maxConsumers is how many consumers a stream may have, 0 for no bound:
// the account's max_consumers bounds each stream's consumers, as
// nats-server enforces it, so the stream's own max_consumers or the
// account's, whichever is lower.
func maxConsumers(scfg *api.StreamConfig, tierLim *api.AccountLimits) int {
	maxc := scfg.MaxConsumers
	if tierLim != nil && tierLim.MaxConsumers > 0 && (maxc <= 0 || tierLim.MaxConsumers < maxc) {
		maxc = tierLim.MaxConsumers
	}
	return max(maxc, 0)
}

// withHeader is a reply sent with a header block.
type withHeader struct {
	resp any
	hdr  []byte
}

// consumerAdvisory publishes $JS.EVENT.ADVISORY.CONSUMER.<kind>.<stream>.<consumer>
// with the members every consumer advisory has, plus adv's.
func (a *jsAccount) consumerAdvisory(kind string, c *consumer, adv map[string]any) {
	adv["id"] = randomName() + randomName()
	adv["timestamp"] = time.Now().UTC()
	adv["stream"], adv["consumer"] = c.stream, c.name
	if d := a.e.opts.Domain; d != "" {
		adv["domain"] = d
	}
	a.advise("$JS.EVENT.ADVISORY.CONSUMER."+kind+"."+c.stream+"."+c.name, adv)
}

// update applies an accepted config change.
func (c *consumer) update(cfg *api.ConsumerConfig) {
	c.mu.Lock()
	moved := cfg.DeliverSubject != c.mu.cfg.DeliverSubject
	c.mu.cfg = cfg
	if moved {
		c.watchLocked()
	}
	c.setFiltersLocked(cfg)
	c.recycleAheadLocked()
	c.mu.aheadTo = 0
	c.mu.dirty = true
	c.mu.Unlock()
	c.wake()
}

// startConsumer registers c with its stream, subscribes its ack and flow
// control subjects and starts its delivery loop. A flow_control consumer
// is acknowledged by flow control answers only: like nats-server it does
// not listen on its ack subjects, so an ack sent as a request finds no
// responder (its ack policy never changes, so neither does this).
func (a *jsAccount) startConsumer(c *consumer) error {
	_, err := a.startConsumers(c.s, []*consumer{c})
	return err
}

// startConsumers starts cs, consumers of s, in order, and returns how
// many it started before one failed. The stream's wake list is rebuilt
// once for all of them: a rebuild is linear in the stream's consumers,
// and a partition's new leader starts every consumer of its streams at
// once, so a rebuild per consumer would be quadratic in them.
func (a *jsAccount) startConsumers(s *stream, cs []*consumer) (int, error) {
	n := 0
	var err error
	for _, c := range cs {
		if err = a.subscribeConsumer(c); err != nil {
			break
		}
		n++
	}
	started := cs[:n]
	if n == 0 {
		return 0, err
	}
	s.mu.Lock()
	for _, c := range started {
		s.mu.cons[c.name] = c
	}
	s.consumersChangedLocked()
	s.mu.Unlock()
	for _, c := range started {
		go c.run()
		c.wake()
	}
	return n, err
}

// subscribeConsumer subscribes c's flow control and ack subjects and
// watches its deliver subject's interest.
func (a *jsAccount) subscribeConsumer(c *consumer) error {
	type handler struct {
		filter string
		h      func(subject, reply, hdr, msg []byte)
	}
	subs := []handler{{c.fcPrefix + "*", c.onFlowControl}}
	if c.config().AckPolicy != api.AckFlowControl {
		subs = append(subs, handler{c.ackPrefix + ">", c.onAck})
	}
	for _, sub := range subs {
		unsub, err := a.acc.SubscribeInternal(sub.filter, sub.h)
		if err != nil {
			c.stopSubs()
			return err
		}
		c.unsubs = append(c.unsubs, unsub)
	}
	c.mu.Lock()
	c.watchLocked()
	c.mu.Unlock()
	return nil
}

func (c *consumer) stopSubs() {
	// A delete and the partition's release may stop one consumer at
	// once: whichever takes the subscriptions first ends them.
	c.mu.Lock()
	unsubs := c.unsubs
	c.unsubs = nil
	if c.mu.unwatch != nil {
		c.mu.unwatch()
		c.mu.unwatch = nil
	}
	c.mu.Unlock()
	for _, u := range unsubs {
		u()
	}
}

// watchLocked makes a client subscribing to the deliver subject wake the
// delivery loop at once.
func (c *consumer) watchLocked() {
	if c.mu.unwatch != nil {
		c.mu.unwatch()
		c.mu.unwatch = nil
	}
	if ds := c.mu.cfg.DeliverSubject; ds != "" {
		c.mu.unwatch = c.a.acc.WatchInterest(ds, c.wake)
	}
}

// deleteConsumer removes c: waiting pulls hear 409 Consumer Deleted, the
// loop stops, and a kept consumer's records (keepsConsumer) go through
// the apply path. It returns nil if c was already gone; otherwise a
// channel that gets the outcome of the record's removal (at once for a
// consumer the store does not keep), for the API's answer to wait on: a
// delete a client was told of must not come back on the partition's next
// leader.
func (a *jsAccount) deleteConsumer(c *consumer, reason string) <-chan result {
	c.mu.Lock()
	if c.mu.deleted {
		c.mu.Unlock()
		return nil
	}
	c.mu.deleted = true
	waiting := c.mu.waiting
	c.mu.waiting = nil
	kept := c.s.keepsConsumer(c.mu.cfg)
	c.mu.Unlock()
	c.stopSubs()
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	for _, r := range waiting {
		a.acc.Publish(r.reply, "", hdrConsumerDeleted, nil)
	}
	s := c.s
	s.mu.Lock()
	if s.mu.cons[c.name] == c {
		delete(s.mu.cons, c.name)
		s.consumersChangedLocked()
	}
	interest := s.mu.cfg.Retention == api.InterestPolicy
	s.mu.Unlock()
	var removed <-chan result
	if kept {
		removed = s.ap.start(&proposal{s: s, acct: a, kind: propConsumerDelete, cons: c})
	} else {
		done := make(chan result, 1)
		done <- result{}
		removed = done
	}
	if interest {
		// What only this consumer still needed is no longer kept.
		c.mu.Lock()
		from := c.mu.ackS + 1
		c.mu.Unlock()
		s.ap.submit(&proposal{s: s, acct: a, kind: propInterestCheck, seq: from, done: func(*proposal, result) {}})
	}
	a.consumerAdvisory("DELETED", c, map[string]any{"type": "io.nats.jetstream.advisory.v1.consumer_action", "action": "delete"})
	a.e.log.Debug("consumer deleted", "stream", c.stream, "consumer", c.name, "reason", reason)
	return removed
}

// advise publishes a JetStream advisory into the account.
func (a *jsAccount) advise(subject string, v any) {
	b, err := json.Marshal(v)
	if err == nil {
		a.acc.Publish(subject, "", nil, b)
	}
}

// consumerFor resolves "<stream>.<consumer>" from an API subject.
func (a *jsAccount) consumerFor(rest string) (*consumer, *api.Error) {
	streamName, name, _ := strings.Cut(rest, ".")
	s := a.lookup(streamName)
	if s == nil {
		return nil, api.NewStreamNotFoundError()
	}
	s.mu.Lock()
	c := s.mu.cons[name]
	s.mu.Unlock()
	if c == nil {
		return nil, api.NewConsumerNotFoundError()
	}
	return c, nil
}

func (a *jsAccount) consumerInfo(req apiRequest, rest string) any {
	const typ = api.TypeConsumerInfoResponse
	if !api.IsEmptyRequest(req.body) {
		return consumerErr(typ, api.NewNotEmptyRequestError())
	}
	c, err := a.consumerFor(rest)
	if err != nil {
		return consumerErr(typ, err)
	}
	return &api.ConsumerInfoResponse{Response: api.Response{Type: typ}, ConsumerInfo: c.info()}
}

// endConsumers deletes the consumers of s, a stream just removed, as
// nats-server does: delivery and heartbeats stop at once, waiting pull
// requests hear 409 Consumer Deleted, and each consumer's delete is
// advised. Their records went with the stream's.
func (a *jsAccount) endConsumers(s *stream) {
	s.mu.Lock()
	cons := s.consumersLocked()
	s.mu.Unlock()
	for _, c := range cons {
		a.deleteConsumer(c, "stream deleted")
	}
}

func (a *jsAccount) consumerDelete(req apiRequest, rest string) any {
	const typ = api.TypeConsumerDeleteResponse
	if !api.IsEmptyRequest(req.body) {
		return &api.SuccessResponse{Response: api.Response{Type: typ, Error: api.NewNotEmptyRequestError()}}
	}
	c, err := a.consumerFor(rest)
	if err != nil {
		return &api.SuccessResponse{Response: api.Response{Type: typ, Error: err}}
	}
	if removed := a.deleteConsumer(c, "api"); removed != nil {
		if r := <-removed; r.err != nil {
			return &api.SuccessResponse{Response: api.Response{Type: typ, Error: api.Prefer(r.err, api.NewConsumerStoreFailedError(r.err))}}
		}
	}
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}

// sortedConsumers lists a stream's consumers by name.
func (s *stream) sortedConsumers() []*consumer {
	s.mu.Lock()
	list := s.consumersLocked()
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

func (a *jsAccount) consumerNames(req apiRequest, streamName string) any {
	const typ = api.TypeConsumerNamesResponse
	var preq api.ConsumersRequest
	if err := decode(req.body, &preq); err != nil {
		return &api.ConsumerNamesResponse{Response: api.Response{Type: typ, Error: err}}
	}
	s := a.lookup(streamName)
	if s == nil {
		return &api.ConsumerNamesResponse{Response: api.Response{Type: typ, Error: api.NewStreamNotFoundError()}, Consumers: []string{}}
	}
	all := s.sortedConsumers()
	list, offset := page(all, preq.Offset, namesPage)
	names := []string{}
	for _, c := range list {
		names = append(names, c.name)
	}
	return &api.ConsumerNamesResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: len(all), Offset: offset, Limit: namesPage}, Consumers: names}
}

func (a *jsAccount) consumerList(req apiRequest, streamName string) any {
	const typ = api.TypeConsumerListResponse
	var preq api.ConsumersRequest
	if err := decode(req.body, &preq); err != nil {
		return &api.ConsumerListResponse{Response: api.Response{Type: typ, Error: err}}
	}
	s := a.lookup(streamName)
	if s == nil {
		return &api.ConsumerListResponse{Response: api.Response{Type: typ, Error: api.NewStreamNotFoundError()}, Consumers: []*api.ConsumerInfo{}}
	}
	all := s.sortedConsumers()
	list, offset := page(all, preq.Offset, listPage)
	infos := []*api.ConsumerInfo{}
	for _, c := range list {
		infos = append(infos, c.info())
	}
	return &api.ConsumerListResponse{Response: api.Response{Type: typ},
		Paged: api.Paged{Total: len(all), Offset: offset, Limit: listPage}, Consumers: infos}
}

// consumerNext queues a pull request; replies come from the delivery loop.
func (a *jsAccount) consumerNext(req apiRequest, rest string) any {
	defer a.guard(req)
	if req.reply == "" {
		return nil
	}
	c, err := a.consumerFor(rest)
	if err != nil {
		// nats-server has no subscriber for a missing consumer's pull
		// subject: the requester hears no responders.
		a.acc.Publish(req.reply, "", []byte("NATS/1.0 503\r\n\r\n"), nil)
		return nil
	}
	c.pull(req.reply, req.body)
	return nil
}

func (a *jsAccount) consumerPause(req apiRequest, rest string) any {
	const typ = api.TypeConsumerPauseResponse
	var preq api.ConsumerPauseRequest
	if err := decode(req.body, &preq); err != nil {
		return &api.ConsumerPauseResponse{Response: api.Response{Type: typ, Error: err}}
	}
	c, err := a.consumerFor(rest)
	if err != nil {
		return &api.ConsumerPauseResponse{Response: api.Response{Type: typ, Error: err}}
	}
	cfg := c.config().Clone()
	now := c.now()
	if preq.PauseUntil.After(now) {
		t := preq.PauseUntil.UTC()
		cfg.PauseUntil = &t
	} else {
		cfg.PauseUntil = nil
	}
	cfg.StampRequiredLevel()
	prev := c.config()
	old := prev.PauseUntil
	c.update(cfg)
	if c.s.keepsConsumer(cfg) {
		// A pause the store did not take is not made (nor announced).
		if r := c.s.ap.apply(&proposal{s: c.s, acct: a, kind: propConsumerCreate, cons: c}); r.err != nil {
			c.update(prev)
			return &api.ConsumerPauseResponse{Response: api.Response{Type: typ,
				Error: api.Prefer(r.err, api.NewStreamGeneralError(r.err))}}
		}
	}
	if (old == nil) != (cfg.PauseUntil == nil) || (old != nil && !old.Equal(*cfg.PauseUntil)) {
		adv := map[string]any{"type": "io.nats.jetstream.advisory.v1.consumer_pause", "paused": cfg.PauseUntil != nil}
		if cfg.PauseUntil != nil {
			adv["pause_until"] = *cfg.PauseUntil
		}
		a.consumerAdvisory("PAUSE", c, adv)
	}
	resp := &api.ConsumerPauseResponse{Response: api.Response{Type: typ}}
	if cfg.PauseUntil != nil {
		resp.Paused, resp.PauseUntil, resp.PauseRemaining = true, *cfg.PauseUntil, cfg.PauseUntil.Sub(now)
	}
	return resp
}

func (a *jsAccount) consumerStepdown(_ apiRequest, rest string) any {
	const typ = api.TypeConsumerLeaderStepdownResponse
	c, err := a.consumerFor(rest)
	if err != nil {
		return &api.Response{Type: typ, Error: err}
	}
	// A consumer lives with its stream: its leader is the partition's.
	if err := a.stepdown(c.s, ""); err != nil {
		return &api.Response{Type: typ, Error: err}
	}
	return &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true}
}
