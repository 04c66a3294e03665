package jetstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The digest check. Replicas of a partition commit byte-identical batches,
// so at one raft index they hold identical records; a replica that does
// not (a lost write, a stray record, a bug, rot that checksums did not
// catch because it was written that way) is divergent. Every
// Options.DigestInterval the leader of each partition proposes a check
// marker (an entry with no writes, digestMarker in its extensions). Each
// member, when it applies the marker, freezes a store View at that index
// and hashes the partition's streams from it, off the apply path. The
// leader then gathers the members' digests for that index. A member whose
// digest differs from the one held by a majority of the group's members
// (or whose records fail their checksums) is divergent, and is repaired:
// it discards its copy of the partition and rejoins as a new incarnation,
// caught up from the leader by log or snapshot, voting again only once
// current. If the leader is the divergent one, it hands its leadership
// over first. No majority, no repair: nobody knows which copy is right.
//
// Invariant: a repair is asked for only while a majority of the members
// agree without the repaired one, so the group keeps its quorum and the
// agreeing copy.

// digestMarker marks a raft entry as a check marker (raft.Log.Extensions).
var digestMarker = []byte("contrail/digest-check/1")

// The control operations of the check.
const (
	digestOp = "jetstream.digest"
	repairOp = "jetstream.repair"
)

// digestWait bounds how long a member waits for its own digest of a
// marker it has not applied or hashed yet.
const digestWait = 5 * time.Second

// partitionDigest is one member's digest of a partition at a marker.
type partitionDigest struct {
	Index uint64 `json:"index"`
	// Sum covers every stream's digest, in id order; "" when Err is set.
	Sum string `json:"sum,omitempty"`
	// Streams maps each stream id to its data and metadata hashes.
	Streams map[uint64]string `json:"streams,omitempty"`
	// Err says why the copy could not be hashed (a record failed its
	// checksum): a copy that cannot be read is divergent.
	Err string `json:"error,omitempty"`
}

// digestRequest asks a member for its digest at Index, or (repairOp)
// tells it that a majority holds Sum there.
type digestRequest struct {
	Index uint64 `json:"index"`
	Sum   string `json:"sum,omitempty"`
}

// digests holds this node's latest digest of each partition.
type digests struct {
	mu      sync.Mutex
	latest  map[uint16]*partitionDigest // guarded by mu
	running map[uint16]bool             // guarded by mu: a hash is under way
	// changed is closed and replaced whenever latest changes.
	changed chan struct{} // guarded by mu
}

func newDigests() *digests {
	return &digests{latest: map[uint16]*partitionDigest{}, running: map[uint16]bool{}, changed: make(chan struct{})}
}

// markerApplied runs on partition g's FSM goroutine when it applies the
// marker at index, with every entry before it committed: it freezes the
// store there and hashes the view on a goroutine of its own. A marker met
// while the previous one is still being hashed is skipped (its leader
// hears no digest from this member and tries again next time).
func (c *clusterState) markerApplied(g uint16, index uint64) {
	d := c.digests
	d.mu.Lock()
	if d.running[g] {
		d.mu.Unlock()
		return
	}
	d.running[g] = true
	d.mu.Unlock()
	v, err := c.e.opts.Store.View()
	if err != nil {
		d.finish(g, &partitionDigest{Index: index, Err: err.Error()})
		return
	}
	c.e.wg.Add(1)
	go func() {
		defer c.e.wg.Done()
		defer v.Close()
		d.finish(g, hashPartition(index, func(fn func(id uint64, key, payload []byte, meta bool) error) error {
			return v.PartitionRecords(g, fn)
		}))
	}()
}

// hashPartition digests the records read lists, stream by stream.
func hashPartition(index uint64, read func(fn func(id uint64, key, payload []byte, meta bool) error) error) *partitionDigest {
	hashers := map[uint64]*recordHasher{}
	err := read(func(id uint64, key, payload []byte, meta bool) error {
		h := hashers[id]
		if h == nil {
			h = newRecordHasher()
			hashers[id] = h
		}
		return h.add(key, payload, meta)
	})
	if err != nil {
		return &partitionDigest{Index: index, Err: err.Error()}
	}
	ids := make([]uint64, 0, len(hashers))
	for id := range hashers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	d := &partitionDigest{Index: index, Streams: make(map[uint64]string, len(ids))}
	sum := sha256.New()
	for _, id := range ids {
		data, conf := hashers[id].sums()
		d.Streams[id] = data + "/" + conf
		sum.Write(binary.BigEndian.AppendUint64(nil, id))
		sum.Write([]byte(d.Streams[id]))
	}
	d.Sum = hex.EncodeToString(sum.Sum(nil))
	return d
}

// finish records g's digest and wakes its waiters.
func (d *digests) finish(g uint16, pd *partitionDigest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running[g] = false
	d.latest[g] = pd
	close(d.changed)
	d.changed = make(chan struct{})
}

// at returns this node's digest of g at index, waiting up to digestWait
// for it; errDigestGone if a later marker replaced it.
func (d *digests) at(g uint16, index uint64, quit <-chan struct{}) (*partitionDigest, error) {
	deadline := time.NewTimer(digestWait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		pd, changed := d.latest[g], d.changed
		d.mu.Unlock()
		switch {
		case pd != nil && pd.Index == index:
			return pd, nil
		case pd != nil && pd.Index > index:
			return nil, errDigestGone
		}
		select {
		case <-changed:
		case <-deadline.C:
			return nil, fmt.Errorf("partition %d: no digest at index %d within %v", g, index, digestWait)
		case <-quit:
			return nil, errDigestGone
		}
	}
}

// errDigestGone: the digest asked for was replaced by a later one.
var errDigestGone = errors.New("jetstream: digest replaced by a later one")

// serveDigest answers a peer's digestOp.
func (c *clusterState) serveDigest(_ string, g uint16, body []byte) ([]byte, error) {
	var req digestRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("digest request: %w", err)
	}
	pd, err := c.digests.at(g, req.Index, c.quit)
	if err != nil {
		return nil, err
	}
	return json.Marshal(pd)
}

// serveRepair answers a leader's repairOp: if this node's own digest at
// the index differs from the majority's, it repairs its copy. It checks
// for itself, so a confused leader cannot wipe a good copy.
func (c *clusterState) serveRepair(from string, g uint16, body []byte) ([]byte, error) {
	var req digestRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("repair request: %w", err)
	}
	if g == 0 || int(g) > c.r.Partitions() {
		return nil, fmt.Errorf("repair request: no partition %d", g)
	}
	pd, err := c.digests.at(g, req.Index, c.quit)
	if err != nil {
		return nil, err
	}
	if pd.Err == "" && pd.Sum == req.Sum {
		return nil, fmt.Errorf("partition %d: this copy matches the majority at index %d", g, req.Index)
	}
	c.e.log.Warn("jetstream partition copy diverges from the majority: repairing it", "group", g, "index", req.Index, "asked_by", from)
	c.repair(g)
	return json.Marshal(true)
}

// repair replaces this node's copy of partition g, on a goroutine: the
// caller is a control exchange or the check loop, which must not wait for
// the rejoin.
func (c *clusterState) repair(g uint16) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.r.Group(g).Repair(); err != nil {
			c.e.log.Error("jetstream partition repair failed", "group", g, "err", err)
		}
	}()
}

// checkLoop runs the digest check of every partition this node leads,
// one partition at a time, every interval.
func (c *clusterState) checkLoop(interval time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		for g := uint16(1); int(g) <= c.r.Partitions(); g++ {
			if !c.leads(g) {
				continue
			}
			if err := c.checkPartition(g); err != nil {
				c.e.log.Info("jetstream partition digest check skipped", "group", g, "err", err)
			}
		}
	}
}

// leads reports whether this node leads partition g and has loaded it.
func (c *clusterState) leads(g uint16) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.parts[g] != nil
}

// checkPartition runs one digest check of partition g from its leader and
// reports what it found: the members that diverge from the majority
// (they have been asked to repair), or an error if no verdict was
// reached.
func (c *clusterState) checkPartition(g uint16) error {
	grp := c.r.Group(g)
	f := grp.ApplyMarker(digestMarker, replicateTimeout)
	if err := waitEntryOr(f, c.quit); err != nil {
		return fmt.Errorf("propose marker: %w", err)
	}
	index := f.Index()
	self := c.r.NodeID()
	members := grp.Members()
	answers := c.gatherDigests(g, index, members)
	good, divergent := verdict(members, answers)
	if good == "" {
		if len(answers) == len(members) {
			c.e.log.Error("jetstream partition copies differ and no majority agrees: nothing repaired", "group", g, "index", index, "members", len(members))
		}
		return fmt.Errorf("no majority of %d members answered alike at index %d", len(members), index)
	}
	for _, m := range divergent {
		c.e.log.Warn("jetstream partition copy diverges from the majority", "group", g, "index", index, "node", m,
			"streams", c.divergentStreams(g, answers[m], answers, good), "error", answers[m].Err)
		if m == self {
			c.repair(g)
			continue
		}
		req, _ := json.Marshal(digestRequest{Index: index, Sum: good})
		if _, err := c.r.Call(m, repairOp, g, req); err != nil {
			c.e.log.Warn("jetstream partition repair request failed", "group", g, "node", m, "err", err)
		}
	}
	return nil
}

// gatherDigests collects the members' digests of g at index, this node's
// included; a member that does not answer in time, or answers for
// another index, is left out. The wait ends early when the engine closes.
func (c *clusterState) gatherDigests(g uint16, index uint64, members []string) map[string]*partitionDigest {
	type answer struct {
		node string
		pd   *partitionDigest
	}
	self := c.r.NodeID()
	body, _ := json.Marshal(digestRequest{Index: index})
	// Buffered for every member: a call answering after the wait ended
	// leaves its answer and its goroutine ends.
	ch := make(chan answer, len(members))
	for _, m := range members {
		go func() {
			if m == self {
				pd, err := c.digests.at(g, index, c.quit)
				if err != nil {
					pd = nil
				}
				ch <- answer{m, pd}
				return
			}
			out, err := c.r.Call(m, digestOp, g, body)
			pd := &partitionDigest{}
			if err != nil || json.Unmarshal(out, pd) != nil || pd.Index != index {
				pd = nil
			}
			ch <- answer{m, pd}
		}()
	}
	answers := map[string]*partitionDigest{}
	deadline := time.NewTimer(2 * digestWait)
	defer deadline.Stop()
	for range members {
		select {
		case a := <-ch:
			if a.pd != nil {
				answers[a.node] = a.pd
			}
		case <-deadline.C:
			return answers
		case <-c.quit:
			return answers
		}
	}
	return answers
}

// verdict finds the digest a majority of members hold at one index, and
// the members that answered with another (or could not hash their copy).
// good is "" when no digest has a majority; members that did not answer
// are neither good nor divergent.
func verdict(members []string, answers map[string]*partitionDigest) (good string, divergent []string) {
	count := map[string]int{}
	for _, pd := range answers {
		if pd.Err == "" {
			count[pd.Sum]++
		}
	}
	for sum, n := range count {
		if n > len(members)/2 {
			good = sum
		}
	}
	if good == "" {
		return "", nil
	}
	for _, m := range members {
		if pd, ok := answers[m]; ok && (pd.Err != "" || pd.Sum != good) {
			divergent = append(divergent, m)
		}
	}
	return good, divergent
}

// divergentStreams names, for the log, up to ten streams whose digests in
// bad differ from those of a copy that holds the majority's digest.
func (c *clusterState) divergentStreams(g uint16, bad *partitionDigest, answers map[string]*partitionDigest, good string) []string {
	var ref *partitionDigest
	for _, pd := range answers {
		if pd.Err == "" && pd.Sum == good {
			ref = pd
			break
		}
	}
	if ref == nil || bad == nil || bad.Err != "" {
		return nil
	}
	names := map[uint64]string{}
	for _, asg := range c.catalog.inGroup(g) {
		names[asg.ID] = asg.Account + "/" + asg.Name
	}
	var out []string
	add := func(id uint64) {
		if len(out) < 10 {
			out = append(out, fmt.Sprintf("%s (id %d)", names[id], id))
		}
	}
	for id, h := range ref.Streams {
		if bad.Streams[id] != h {
			add(id)
		}
	}
	for id := range bad.Streams {
		if _, ok := ref.Streams[id]; !ok {
			add(id)
		}
	}
	slices.Sort(out)
	return out
}

// isDigestMarker reports whether a partition entry's extensions make it a
// check marker.
func isDigestMarker(ext []byte) bool { return bytes.Equal(ext, digestMarker) }
