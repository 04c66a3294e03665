package jetstream

import (
	"context"
	"slices"
	"time"

	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
)

// Orphaned objects. Every object the mover puts is named by a record
// from before its upload starts (the intent) until the deleter removes
// it, so an object no record names is a leak the crash-point design does
// not expect: a data directory restored from an older copy, a node
// rebuilt empty under the same name, a bug. The orphan scan finds and
// removes those, a page of the bucket's listing at a time.
//
// Invariants, so several nodes (and several clusters) can share a bucket
// and an upload in flight is never touched:
//   - a node judges only keys of its own cluster (tier.ParseSegmentKey
//     names the node that made them), never a key of any other shape;
//   - an R1 stream's objects are judged against this node's own records,
//     and only those it made;
//   - a replicated stream's objects, whichever member made them (a
//     former leader, perhaps gone for good), only while this node leads
//     the stream's partition, so the records it reads are the
//     partition's committed state: a member uploads only after its
//     intent committed there, so whatever it put is named in it;
//   - an object is removed only if it is older than OrphanAge, no upload
//     of this node is putting it, and no pending record (intent or
//     garbage) nor manifest entry names it. Pending records are read
//     before manifests: an object moves from an intent to the manifest
//     in one batch, so it is always seen in one of the two.

// scanLoop runs the orphan scan every OrphanInterval on its own
// goroutine: a slow listing never delays uploads or deletes.
func (t *tiering) scanLoop() {
	defer close(t.scanDone)
	tick := time.NewTicker(t.opts.OrphanInterval)
	defer tick.Stop()
	after := ""
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		next, err := t.scanOrphans(after)
		if err != nil {
			t.e.log.Warn("tier: orphan scan failed; trying again next interval", "store", t.st.String(), "err", err)
			continue
		}
		if next == "" {
			t.orphanPasses.Add(1)
		}
		after = next
	}
}

// scanOrphans examines one page of the store's listing from after and
// removes the orphans in it; it returns where the next page starts
// (empty: from the beginning again).
func (t *tiering) scanOrphans(after string) (string, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.UploadTimeout)
	defer cancel()
	objs, next, err := t.st.ListPage(ctx, after, t.opts.OrphanPage)
	if err != nil {
		return after, err
	}
	now := time.Now()
	byGroup := map[uint16][]string{}
	for _, o := range objs {
		node, stream, _, ok := tier.ParseSegmentKey(o.Key)
		if !ok || now.Sub(o.Modified) < t.opts.OrphanAge {
			continue
		}
		g := groupOf(stream)
		if node != t.opts.Node && (g == 0 || !t.member(node)) {
			continue
		}
		byGroup[g] = append(byGroup[g], o.Key)
	}
	for g, keys := range byGroup {
		if !t.judges(g) {
			continue
		}
		named, err := t.namedIn(g, keys)
		if err != nil {
			return after, err
		}
		for _, k := range keys {
			t.mu.Lock()
			busy := t.mu.inflight[k]
			t.mu.Unlock()
			if named[k] || busy {
				continue
			}
			if err := t.st.Delete(ctx, k); err != nil {
				t.deleteErrors.Add(1)
				return after, err
			}
			t.cache.Forget(k)
			t.orphans.Add(1)
			t.e.log.Warn("tier: deleted orphaned object (no record named it)", "key", k)
		}
	}
	return next, nil
}

// member reports whether node is one of this cluster's members.
func (t *tiering) member(node string) bool {
	return t.e.cl != nil && t.e.cl.r != nil && slices.Contains(t.e.cl.r.Peers(), node)
}

// judges reports whether this node may decide about objects of the
// streams of group g: its own (R1) streams, or a partition it leads.
func (t *tiering) judges(g uint16) bool {
	if g == 0 {
		return true
	}
	c := t.e.cl
	if c == nil {
		return false
	}
	c.mu.Lock()
	ap := c.mu.parts[g]
	c.mu.Unlock()
	return ap != nil && t.leads(ap)
}

// namedIn returns which of keys (objects of streams in group g) a
// pending record or a manifest entry names.
func (t *tiering) namedIn(g uint16, keys []string) (map[string]bool, error) {
	named := map[string]bool{}
	lo, hi := uint64(g)<<partitionShift, uint64(g+1)<<partitionShift
	st := t.e.opts.Store
	if err := st.PendingObjects(lo, hi, func(p store.PendingObject) error {
		named[p.Key] = true
		return nil
	}); err != nil {
		return nil, err
	}
	seen := map[uint64]bool{}
	for _, k := range keys {
		_, stream, _, _ := tier.ParseSegmentKey(k)
		if seen[stream] {
			continue
		}
		seen[stream] = true
		if err := st.Segments(stream, func(seg store.Segment) error {
			named[seg.Key] = true
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return named, nil
}
