package jetstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// assignment is one stream in the meta catalog: where it lives and what it
// is. Every node holds the whole catalog; the stream's data lives in its
// partition (R>1, on every member) or on its owner (R1).
type assignment struct {
	Account string            `json:"account"`
	Name    string            `json:"name"`
	ID      uint64            `json:"id"`
	Owner   string            `json:"owner,omitempty"` // R1: the node holding it
	Config  *api.StreamConfig `json:"config"`
	Created time.Time         `json:"created"`
	// Restore marks a stream a STREAM.RESTORE placed: it is made by the
	// restore, from its request, never empty by materialize.
	Restore bool `json:"restore,omitempty"`
}

// group is the raft group carrying the stream's data; 0 for R1.
func (a *assignment) group() uint16 { return groupOf(a.ID) }

// metaOp names what a meta entry does.
type metaOp string

const (
	metaCreate metaOp = "create"
	metaUpdate metaOp = "update"
	metaDelete metaOp = "delete"
	// metaRequest changes nothing: it hands a request (a repeated create)
	// to the stream's node, in order with the catalog's changes.
	metaRequest metaOp = "request"
)

// metaEntry is one entry of the meta group's log.
type metaEntry struct {
	Op  metaOp      `json:"op"`
	Asg *assignment `json:"asg"`
	// The client's request, answered by the node that holds the stream
	// once the entry is applied there.
	Subject string `json:"subject,omitempty"`
	Reply   string `json:"reply,omitempty"`
	Body    []byte `json:"body,omitempty"`
}

// metaCatalog is the meta group's state: every stream of the cluster.
type metaCatalog struct {
	mu       sync.Mutex
	accounts map[string]map[string]*assignment // account → name → assignment; guarded by mu
	byID     map[uint64]*assignment            // guarded by mu
	// count is how many streams each group carries (0: R1 streams), and
	// owned how many R1 streams each node holds: what placement weighs.
	count map[uint16]int // guarded by mu
	owned map[string]int // guarded by mu
	// last is the highest id ever assigned in each group. Invariant: it
	// never decreases, deletes included, so no id is ever given twice:
	// a deleted stream's records may still be on a replica that has not
	// applied the delete, and must never be taken for a new stream's.
	last map[uint16]uint64 // guarded by mu
	// index files each account's streams in a stream index, the one a
	// single node checks subjects with, kept up to date by put and
	// remove: a create's overlap check costs what it costs on one node,
	// not a rebuild of the account's whole index. Guarded by mu.
	index map[string]*catalogIndex
	// direct files each account's mirror_direct mirrors under their
	// origin's name (account → origin → mirror names), so that a direct
	// get on an origin the catalog lacks finds the mirror that answers
	// without a scan of the account. Guarded by mu.
	direct map[string]map[string]map[string]bool
}

// catalogIndex is one account's streams in a stream index, each
// assignment filed through a stand-in stream.
type catalogIndex struct {
	idx   *streamIndex
	stand map[string]*stream      // by stream name
	of    map[*stream]*assignment // the assignment each stand-in is for
}

func newMetaCatalog() *metaCatalog {
	return &metaCatalog{accounts: map[string]map[string]*assignment{}, byID: map[uint64]*assignment{},
		count: map[uint16]int{}, owned: map[string]int{}, last: map[uint16]uint64{}, index: map[string]*catalogIndex{},
		direct: map[string]map[string]map[string]bool{}}
}

// replace takes other's contents (a snapshot's catalog).
func (m *metaCatalog) replace(other *metaCatalog) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accounts, m.byID, m.count, m.owned, m.last, m.index, m.direct = other.accounts, other.byID, other.count, other.owned, other.last, other.index, other.direct
}

// overlaps reports whether subjects overlap those of a stream of account
// other than the one named except.
func (m *metaCatalog) overlaps(account, except string, subjects []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.index[account]
	if x == nil {
		return false
	}
	return x.idx.overlaps(subjects, x.stand[except])
}

// matching lists the account's assignments with a subject overlapping
// filter, in name order.
func (m *metaCatalog) matching(account, filter string) []*assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.index[account]
	if x == nil {
		return nil
	}
	matched := x.idx.matching(filter)
	out := make([]*assignment, 0, len(matched))
	for _, s := range matched {
		out = append(out, x.of[s])
	}
	return out
}

// each calls fn with every assignment of account, in no order, under
// the catalog's lock: fn must not call back into the catalog.
func (m *metaCatalog) each(account string, fn func(*assignment)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.accounts[account] {
		fn(a)
	}
}

// lastPrefix starts the meta records of each group's highest assigned
// id. Account names are never empty, so a key that starts with a zero
// byte is no stream's (metaKey).
const lastPrefix = "\x00last/"

// lastKey is the meta record of group g's highest assigned id.
func lastKey(g uint16) []byte { return binary.BigEndian.AppendUint16([]byte(lastPrefix), g) }

// noteLast raises group g's highest assigned id to id.
func (m *metaCatalog) noteLast(g uint16, id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[g] = max(m.last[g], id)
}

// lastID is the highest id assigned in group g so far.
func (m *metaCatalog) lastID(g uint16) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[g]
}

func (m *metaCatalog) lookup(account, name string) *assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.accounts[account][name]
}

// byIDOf is the assignment of the stream with id, nil if none.
func (m *metaCatalog) byIDOf(id uint64) *assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byID[id]
}

func (m *metaCatalog) put(a *assignment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.accounts[a.Account][a.Name]; old != nil {
		m.forgetLocked(old)
	}
	if m.accounts[a.Account] == nil {
		m.accounts[a.Account] = map[string]*assignment{}
	}
	m.accounts[a.Account][a.Name] = a
	m.byID[a.ID] = a
	x := m.index[a.Account]
	if x == nil {
		x = &catalogIndex{idx: newStreamIndex(1), stand: map[string]*stream{}, of: map[*stream]*assignment{}}
		m.index[a.Account] = x
	}
	s := &stream{}
	x.idx.put(s, a.Config)
	x.stand[a.Name], x.of[s] = s, a
	if origin, ok := directOrigin(a.Config); ok {
		if m.direct[a.Account] == nil {
			m.direct[a.Account] = map[string]map[string]bool{}
		}
		if m.direct[a.Account][origin] == nil {
			m.direct[a.Account][origin] = map[string]bool{}
		}
		m.direct[a.Account][origin][a.Name] = true
	}
	g := a.group()
	m.count[g]++
	if g == 0 {
		m.owned[a.Owner]++
	}
	m.last[g] = max(m.last[g], a.ID)
}

func (m *metaCatalog) remove(account, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.accounts[account][name]; old != nil {
		m.forgetLocked(old)
		delete(m.accounts[account], name)
	}
}

// unindexLocked takes a's stand-in out of its account's index.
func (m *metaCatalog) unindexLocked(a *assignment) {
	x := m.index[a.Account]
	if x == nil {
		return
	}
	if s := x.stand[a.Name]; s != nil && x.of[s] == a {
		x.idx.remove(s)
		delete(x.stand, a.Name)
		delete(x.of, s)
	}
	if len(x.stand) == 0 {
		delete(m.index, a.Account)
	}
}

// forgetLocked takes a out of the id index and the counts; its id stays
// used (last).
func (m *metaCatalog) forgetLocked(a *assignment) {
	delete(m.byID, a.ID)
	m.unindexLocked(a)
	if origin, ok := directOrigin(a.Config); ok {
		delete(m.direct[a.Account][origin], a.Name)
		if len(m.direct[a.Account][origin]) == 0 {
			delete(m.direct[a.Account], origin)
		}
		if len(m.direct[a.Account]) == 0 {
			delete(m.direct, a.Account)
		}
	}
	g := a.group()
	m.count[g]--
	if g == 0 {
		if m.owned[a.Owner]--; m.owned[a.Owner] <= 0 {
			delete(m.owned, a.Owner)
		}
	}
}

// directOrigin is the origin a stream answers direct gets for: that of
// a mirror with mirror_direct in its own account.
func directOrigin(cfg *api.StreamConfig) (string, bool) {
	if cfg == nil || cfg.Mirror == nil || !cfg.MirrorDirect || cfg.Mirror.External != nil {
		return "", false
	}
	return cfg.Mirror.Name, true
}

// directMirror names the mirror that answers direct gets on origin, a
// stream the account's catalog lacks: of its mirror_direct mirrors, the
// first by name, so that one node answers. "" if there is none.
func (m *metaCatalog) directMirror(account, origin string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := ""
	for name := range m.direct[account][origin] {
		if first == "" || name < first {
			first = name
		}
	}
	return first
}

// streams lists an account's assignments by name.
func (m *metaCatalog) streams(account string) []*assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*assignment, 0, len(m.accounts[account]))
	for _, a := range m.accounts[account] {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *assignment) int {
		if x.Name < y.Name {
			return -1
		}
		if x.Name > y.Name {
			return 1
		}
		return 0
	})
	return out
}

// accountNames lists the accounts with streams in the catalog.
func (m *metaCatalog) accountNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.accounts))
	for name, streams := range m.accounts {
		if len(streams) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// inGroup lists the assignments whose data group g carries.
func (m *metaCatalog) inGroup(g uint16) []*assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*assignment
	for id, a := range m.byID {
		if groupOf(id) == g {
			out = append(out, a)
		}
	}
	return out
}

// place chooses where a new stream goes: for R>1 the partition carrying
// the fewest streams among those led now (led reports that; any
// partition if none is), for R1 the node owning the fewest; and the next
// id in that range, above every id the range ever had.
func (m *metaCatalog) place(replicas int, partitions int, peers []string, led func(g uint16) bool) (id uint64, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	count, owned := m.count, m.owned
	var g uint16
	if replicas > 1 {
		for p := uint16(1); int(p) <= partitions; p++ {
			if led(p) && (g == 0 || count[p] < count[g]) {
				g = p
			}
		}
		for p := uint16(1); g == 0 && int(p) <= partitions; p++ {
			if g == 0 || count[p] < count[g] {
				g = p
			}
		}
	} else {
		owner = peers[0]
		for _, p := range peers[1:] {
			if owned[p] < owned[owner] {
				owner = p
			}
		}
	}
	id = max(m.last[g], uint64(g)<<partitionShift) + 1
	return id, owner
}

// metaKey is the store key of an assignment's catalog record.
func metaKey(account, name string) []byte {
	return append(append(append([]byte(nil), account...), 0), name...)
}

// loadCatalog reads the meta catalog from the store at start-up.
func (c *clusterState) loadCatalog(st *store.Store) error { return loadCatalogInto(c.catalog, st) }

func loadCatalogInto(cat *metaCatalog, st *store.Store) error {
	return st.MetaRecords(nil, func(key, val []byte) error {
		if g, ok := bytes.CutPrefix(key, []byte(lastPrefix)); ok {
			if len(g) != 2 || len(val) != 8 {
				return fmt.Errorf("jetstream: meta catalog id record: %w", store.ErrCorrupt)
			}
			cat.noteLast(binary.BigEndian.Uint16(g), binary.BigEndian.Uint64(val))
			return nil
		}
		var a assignment
		if err := json.Unmarshal(val, &a); err != nil || a.Config == nil {
			return fmt.Errorf("jetstream: meta catalog record: %w", store.ErrCorrupt)
		}
		cat.put(&a)
		return nil
	})
}

// metaFSM applies the meta group's entries on every node: the catalog
// records and the applied index in one batch, then the catalog in memory,
// then each entry's request on the node that holds its stream.
type metaFSM struct {
	groupFSM
	c *clusterState
}

// ApplyBatch implements raft.BatchingFSM.
func (f *metaFSM) ApplyBatch(logs []*raft.Log) []any {
	var applied []*metaEntry
	// The highest id each group has had, entries of this batch included
	// (the catalog in memory learns them after the commit).
	last := map[uint16]uint64{}
	out := f.applyBatch(logs, func(b *store.Batch, l *raft.Log) any {
		var ent metaEntry
		if err := json.Unmarshal(l.Data, &ent); err != nil || ent.Asg == nil || ent.Asg.Config == nil {
			// Every node sees the same bytes, so every node skips it alike.
			f.c.e.log.Error("jetstream meta entry unreadable; skipped", "index", l.Index, "err", err)
			return nil
		}
		key := metaKey(ent.Asg.Account, ent.Asg.Name)
		switch ent.Op {
		case metaCreate, metaUpdate:
			rec, _ := json.Marshal(ent.Asg)
			b.PutMetaRecord(key, rec)
			if g := ent.Asg.group(); ent.Asg.ID > max(last[g], f.c.catalog.lastID(g)) {
				last[g] = ent.Asg.ID
				b.PutMetaRecord(lastKey(g), binary.BigEndian.AppendUint64(nil, ent.Asg.ID))
			}
		case metaDelete:
			b.DeleteMetaRecord(key)
		}
		applied = append(applied, &ent)
		return nil
	})
	// After the commit: what the catalog says is on disk first.
	answer := false
	for _, ent := range applied {
		f.c.applyMeta(ent)
		answer = answer || ent.Subject != ""
	}
	if answer && f.c.r.Group(0).IsLeader() {
		f.c.nudgeMeta()
	}
	return out
}

// nudgeMeta has the meta leader tell its followers the commit index now,
// by appending a barrier (an entry no FSM sees) that carries it, instead
// of at the group's next commit timeout. An entry with a request is
// answered by the node serving its stream, often a follower, which can
// run it only once it learns the entry is committed; the nudge lets the
// commit timeout be long (the meta group's idle traffic) without the
// answer waiting for it. Nudges fold into the one in flight.
func (c *clusterState) nudgeMeta() {
	c.nudgeAgain.Store(true)
	if !c.nudging.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for c.nudgeAgain.Swap(false) {
			// Not leader any more, or stopping: the new leader's
			// first append carries the commit index.
			if err := c.r.Group(0).Barrier(replicateTimeout); err != nil {
				break
			}
		}
		c.nudging.Store(false)
		if c.nudgeAgain.Load() {
			c.nudgeMeta()
		}
	}()
}

// Apply implements raft.FSM.
func (f *metaFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot implements raft.FSM: the catalog is already in the store, so
// the snapshot store reads it from there; this writes nothing.
func (f *metaFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }

// Restore implements raft.FSM: the snapshot store's records are installed
// and the catalog in memory is read again from them.
func (f *metaFSM) Restore(rc io.ReadCloser) error {
	if err := f.restore(rc); err != nil {
		return err
	}
	cat := newMetaCatalog()
	if err := loadCatalogInto(cat, f.st); err != nil {
		return err
	}
	f.c.catalog.replace(cat)
	f.c.loadCatalogAccounts()
	return nil
}

// applyMeta brings this node in line with one applied meta entry. An
// entry for a stream held here, of an account not registered here (or
// with entries already waiting), waits for the account (see
// cluster_accounts.go); every node asks for the accounts the catalog
// names, so any of them can lead their streams later. An entry for a
// partition not served here is kept for a while (keepEntry).
func (c *clusterState) applyMeta(ent *metaEntry) {
	asg := ent.Asg
	switch ent.Op {
	case metaCreate, metaUpdate:
		c.catalog.put(asg)
	case metaDelete:
		c.catalog.remove(asg.Account, asg.Name)
	}
	if c.keepEntry(ent) {
		if c.e.account(asg.Account) == nil && ent.Op != metaDelete {
			c.needAccount(asg.Account, nil)
		}
		return
	}
	c.serveEntry(ent)
}

// maxKept and maxKeptBytes bound the meta entries kept for one partition
// (keepEntry); past them the oldest go, and their requests go unanswered
// if this node takes the partition (the clients retry), as when no node
// leads it.
const (
	maxKept      = 1024
	maxKeptBytes = 4 << 20
)

// keepAnswerFor is how long an entry kept for a partition not served
// here is still run if this node takes the partition: longer than a
// client waits for its answer (nats.go and the nats CLI give up after
// 5 s), short enough that a request older than that is not replayed
// over what the partition's leader did since.
const keepAnswerFor = 10 * time.Second

// keptEntry is a meta entry kept for a partition this node did not
// serve when the entry was applied.
type keptEntry struct {
	ent *metaEntry
	// until is when the entry is no longer worth running here; zero
	// while this node was already becoming the partition's leader (raft
	// says leader, streams not loaded), which runs it however long the
	// loading takes.
	until time.Time
}

// live reports whether k is still to be run at now.
func (k keptEntry) live(now time.Time) bool { return k.until.IsZero() || now.Before(k.until) }

// keepEntry keeps ent for take if this node does not serve its partition
// now, and says so. The node that did may lose the partition before it
// answers (the entry's request then fails there as never appended, and
// is not answered): whichever node takes the partition next has the
// entry and answers, as nats-server's new stream leader answers a create
// its predecessor did not. Of a node already becoming the leader, the
// entry is run however late; of any other, while a client may still be
// waiting (keepAnswerFor), and only those carrying a request: take
// materializes what the catalog assigns anyway.
//
// Invariant: the check and the keeping are one step under c.mu, the lock
// take sets the partition under, so each entry is either kept (and run
// by take) or served now, never both.
func (c *clusterState) keepEntry(ent *metaEntry) bool {
	g := ent.Asg.group()
	if g == 0 {
		return false
	}
	becoming := c.r.Group(g).IsLeader()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.parts[g] != nil {
		return false
	}
	if ent.Subject == "" && !becoming {
		return true // nothing to answer; take materializes what is assigned
	}
	k := keptEntry{ent: ent}
	if !becoming {
		k.until = c.e.opts.Now().Add(keepAnswerFor)
	}
	kept := append(c.mu.unserved[g], k)
	// Drop what expired, then the oldest past the bounds.
	now, size, from := c.e.opts.Now(), 0, 0
	for i := len(kept) - 1; i >= 0; i-- {
		size += len(kept[i].ent.Body)
		if !kept[i].live(now) || len(kept)-i > maxKept || size > maxKeptBytes {
			from = i + 1
			break
		}
	}
	if from > 0 {
		kept = append(kept[:0:0], kept[from:]...) // let the dropped go
	}
	c.mu.unserved[g] = kept
	return true
}

// serveEntry runs an applied meta entry on this node if it holds the
// entry's stream, once the stream's account is registered here.
func (c *clusterState) serveEntry(ent *metaEntry) {
	asg := ent.Asg
	a := c.e.account(asg.Account)
	if !c.holds(asg) {
		if a == nil && ent.Op != metaDelete {
			c.needAccount(asg.Account, nil)
		}
		return
	}
	if a == nil || c.hasWaiting(asg.Account) {
		c.needAccount(asg.Account, ent) // runs behind those waiting
		return
	}
	c.runEntry(a, ent)
}

// holds reports whether this node serves asg's stream now: it leads the
// stream's partition, or owns the R1 stream.
func (c *clusterState) holds(asg *assignment) bool {
	if g := asg.group(); g != 0 {
		return c.partition(g) != nil
	}
	return asg.Owner == c.r.NodeID()
}

// materialize creates an assigned stream that its partition or owner does
// not hold yet (its create entry was applied while no leader loaded the
// partition), with nobody to answer. Of an account not registered here it
// waits for the account.
func (c *clusterState) materialize(asg *assignment) {
	if asg.Restore {
		// Its restore's request is gone (answered elsewhere, or its
		// client gave up): made empty, the stream would pass for the
		// backup, and hold the name.
		c.forgetRestore(asg.Account, asg.Name, asg.ID)
		return
	}
	a := c.e.account(asg.Account)
	if a == nil {
		c.needAccount(asg.Account, &metaEntry{Op: metaCreate, Asg: asg})
		return
	}
	s, aerr := a.createStream(asg.Config, asg)
	if aerr != nil {
		if !isFateUnknown(aerr) && !isNotAppended(aerr) {
			c.e.log.Error("jetstream: assigned stream not created", "account", asg.Account, "stream", asg.Name, "err", aerr)
		}
		return
	}
	// The catalog's delete or update may have been served before this
	// create began (by then the stream was not here): made since, the
	// stream is removed or updated as that request would have. One
	// served during the create waits for it (awaitCreate).
	if s.id != asg.ID {
		return
	}
	switch cur := c.catalog.lookup(asg.Account, asg.Name); {
	case cur == nil || cur.ID != asg.ID:
		a.streamDelete(apiRequest{a: a, asg: asg}, asg.Name)
		c.e.log.Info("jetstream: stream the catalog deleted while it was made removed", "account", asg.Account, "stream", asg.Name, "id", asg.ID)
	case !sameConfig(s.config(), cur.Config):
		body, _ := json.Marshal(cur.Config)
		var err error
		if e, ok := a.streamUpdate(apiRequest{a: a, asg: cur, body: body}, asg.Name).(interface{ ToError() error }); ok {
			err = e.ToError()
		}
		c.e.log.Info("jetstream: stream the catalog updated while it was made updated", "account", asg.Account, "stream", asg.Name, "id", asg.ID, "err", err)
	}
}

// propose puts one entry in the meta log and waits until it is applied
// here. Called on the meta leader with proposeMu held.
func (c *clusterState) propose(ent *metaEntry) error {
	data, err := json.Marshal(ent)
	if err != nil {
		return err
	}
	return waitEntry(c.r.Group(0).Apply(data, replicateTimeout))
}

// metaServe runs a stream create, update or delete on the meta leader:
// the catalog-wide checks (name, subjects, stream counts), placement,
// then the entry that hands the request to the stream's node, which
// answers it. Refusals are answered here.
func (a *jsAccount) metaServe(req apiRequest, op, name string) {
	c := a.e.cl
	c.proposeMu.Lock()
	defer c.proposeMu.Unlock()
	if !c.metaLeader() {
		return // leadership moved while this waited: the new leader answers
	}
	acct := a.acc.Name()
	have := c.catalog.lookup(acct, name)
	ent := &metaEntry{Subject: req.subject, Reply: req.reply, Body: req.body}
	switch op {
	case "STREAM.CREATE":
		const typ = api.TypeStreamCreateResponse
		cfg, aerr := a.streamConfigFromRequest(req, name, true)
		if aerr != nil {
			a.reply(req.reply, streamErr(typ, aerr))
			return
		}
		if have != nil {
			if !sameConfig(have.Config, cfg) {
				a.reply(req.reply, streamErr(typ, api.NewStreamNameInUseError()))
				return
			}
			ent.Op, ent.Asg = metaRequest, have
			break
		}
		if aerr := c.checkCreate(a, cfg); aerr != nil {
			a.reply(req.reply, streamErr(typ, aerr))
			return
		}
		ent.Op, ent.Asg = metaCreate, c.placeNew(a, name, cfg)
	case "STREAM.RESTORE":
		// Placed as a create; the node that holds the new stream fills
		// it from the client's chunks (api_restore.go), and removes it
		// from the catalog again if that fails (abandonCatalog).
		cfg, aerr := a.restoreConfig(req.body, name)
		if aerr == nil && have != nil {
			aerr = api.NewStreamNameExistRestoreFailedError()
		}
		if aerr == nil {
			aerr = c.checkCreate(a, cfg)
		}
		if aerr != nil {
			a.reply(req.reply, restoreFail(aerr))
			return
		}
		ent.Op, ent.Asg = metaCreate, c.placeNew(a, name, cfg)
		ent.Asg.Restore = true
	case "STREAM.UPDATE":
		const typ = api.TypeStreamUpdateResponse
		if have == nil {
			a.reply(req.reply, streamErr(typ, api.NewStreamNotFoundError()))
			return
		}
		cfg, aerr := a.streamConfigFromRequest(req, name, false)
		if aerr != nil {
			a.reply(req.reply, streamErr(typ, aerr))
			return
		}
		next, aerr := api.CheckStreamUpdate(have.Config, cfg)
		if aerr != nil {
			a.reply(req.reply, streamErr(typ, aerr))
			return
		}
		if (next.Replicas > 1) != (have.Config.Replicas > 1) {
			a.reply(req.reply, streamErr(typ, api.NewStreamUpdateError(fmt.Errorf("changing a stream between one replica and several is not supported"))))
			return
		}
		if c.overlaps(acct, name, next.Subjects) {
			a.reply(req.reply, streamErr(typ, api.NewStreamSubjectOverlapError()))
			return
		}
		if aerr := c.checkTierLimits(a, next, have); aerr != nil {
			a.reply(req.reply, streamErr(typ, aerr))
			return
		}
		upd := *have
		upd.Config = next
		ent.Op, ent.Asg = metaUpdate, &upd
	case "STREAM.DELETE":
		const typ = api.TypeStreamDeleteResponse
		if have == nil || !abandonedIs(req.hdr, have) {
			a.reply(req.reply, streamErr(typ, api.NewStreamNotFoundError()))
			return
		}
		ent.Op, ent.Asg = metaDelete, have
	}
	if err := c.propose(ent); err != nil {
		a.e.log.Warn("jetstream meta proposal failed", "op", op, "stream", name, "err", err)
		if neverAppended(err) {
			// Not in the log and never will be: say so. Otherwise the
			// entry may still apply, and its stream's node will answer.
			typ := metaReplyTypes[op]
			a.reply(req.reply, streamErr(typ, errNotAppended))
		}
	}
}

// placeNew assigns a new stream of a's, cfg, an id (and with it a
// partition, or an owner for one replica) among the cluster's nodes.
func (c *clusterState) placeNew(a *jsAccount, name string, cfg *api.StreamConfig) *assignment {
	id, owner := c.catalog.place(cfg.Replicas, c.r.Partitions(), c.r.Peers(),
		func(g uint16) bool { return c.r.Group(g).Leader() != "" })
	return &assignment{Account: a.acc.Name(), Name: name, ID: id, Owner: owner, Config: cfg, Created: a.e.opts.Now().UTC()}
}

// metaReplyTypes are the reply types of the meta operations.
var metaReplyTypes = map[string]string{
	"STREAM.CREATE":  api.TypeStreamCreateResponse,
	"STREAM.RESTORE": api.TypeStreamRestoreResponse,
	"STREAM.UPDATE":  api.TypeStreamUpdateResponse,
	"STREAM.DELETE":  api.TypeStreamDeleteResponse,
}

// checkCreate runs a new stream's catalog-wide checks.
func (c *clusterState) checkCreate(a *jsAccount, cfg *api.StreamConfig) *api.Error {
	account := a.acc.Name()
	if cfg.Replicas > len(c.r.Peers()) {
		return api.NewClusterNoPeersError(fmt.Errorf("no suitable peers for placement"))
	}
	if c.overlaps(account, cfg.Name, cfg.Subjects) {
		return api.NewStreamSubjectOverlapError()
	}
	return c.checkTierLimits(a, cfg, nil)
}

// overlaps reports whether subjects overlap another stream of the account
// in the catalog, by the same index a single node checks with.
func (c *clusterState) overlaps(account, name string, subjects []string) bool {
	return c.catalog.overlaps(account, name, subjects)
}

// peerDigits is the alphabet of peer hashes, as nats-server prints them.
const peerDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// peerHash is the 8-character name nats-server gives a peer in replica
// lists: derived from the server name.
func peerHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	b := make([]byte, 8)
	for i := range b {
		b[i] = peerDigits[int(sum[i])%len(peerDigits)]
	}
	return string(b)
}
