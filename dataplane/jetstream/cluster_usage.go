package jetstream

import (
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// What a node's store holds of the partitions it follows. A follower
// keeps no streams in memory (the FSM commits its leader's batches as
// they are), so what those streams hold is read from their state
// summaries in the store: counted again every tenth of a second while
// entries are applied (less often where counting takes longer: see
// countLoop), not at all while the partition is idle.
//
// Invariant: the node-wide file store limit (max_file_store) is checked
// against everything this node's store holds: its R1 streams, each
// partition it leads (that term's applier, exact) and each partition it
// follows (as of the last count, at most replicaCountMax old).
// Before, each partition's leader counted its own partition and a copy of
// the R1 usage taken when it took the partition, and the R1 streams none
// of the partitions, so a node of a three-partition cluster could hold
// three times its limit.

// How often the partitions this node follows are counted again, when
// entries were applied to them since the last count: every
// replicaCountMin, or replicaCountShare times what the last count took if
// that is longer (a count reads two records per stream, so with many
// streams it is spaced out to keep its CPU to about 1/replicaCountShare
// of a core), and at least every replicaCountMax.
const (
	replicaCountMin   = 100 * time.Millisecond
	replicaCountMax   = time.Second
	replicaCountShare = 20
)

// partUsage is one partition's share of this node's store.
type partUsage struct {
	// led is this node's applier of the partition while it leads it and
	// has loaded its streams (clusterState.take), nil otherwise.
	led atomic.Pointer[applier]
	// dirty says entries were applied or a snapshot installed since
	// the last count.
	dirty atomic.Bool
	// counted is the last count of the partition's streams, nil before
	// the first.
	counted atomic.Pointer[replicaCount]
}

// replicaCount is what a partition's streams hold per their state
// summaries in this node's store.
type replicaCount struct {
	streams       int
	consumers     int
	msgs          uint64
	memory, bytes uint64 // bytes: every stream's; memory: those of memory streams
}

// usage is partition g's share of this node's store, nil for a group
// that is not a partition of this node.
func (c *clusterState) usage(g uint16) *partUsage {
	parts := c.usages.Load()
	if parts == nil || int(g) >= len(*parts) {
		return nil
	}
	return (*parts)[g]
}

// partitionsUsed is the bytes this node's store holds for every
// partition: the leader's count where it leads, the last count where it
// follows. It is read on every publish (applier.full), so it only loads
// atomics.
func (c *clusterState) partitionsUsed() int64 {
	parts := c.usages.Load()
	if parts == nil {
		return 0
	}
	var n int64
	for _, u := range *parts {
		if u == nil {
			continue
		}
		if ap := u.led.Load(); ap != nil {
			n += ap.used.Load()
		} else if rc := u.counted.Load(); rc != nil {
			n += int64(rc.bytes)
		}
	}
	return n
}

// followed sums the last counts of the partitions this node follows,
// for monitoring: a replica's streams are on this node's disk, and
// nats-server's /jsz counts them on every server that holds one.
func (c *clusterState) followed() replicaCount {
	var out replicaCount
	parts := c.usages.Load()
	if parts == nil {
		return out
	}
	for _, u := range *parts {
		if u == nil || u.led.Load() != nil {
			continue
		}
		if rc := u.counted.Load(); rc != nil {
			out.streams += rc.streams
			out.consumers += rc.consumers
			out.msgs += rc.msgs
			out.memory += rc.memory
			out.bytes += rc.bytes
		}
	}
	return out
}

// countReplicas counts again each partition this node follows that
// changed since its last count.
func (c *clusterState) countReplicas() {
	parts := c.usages.Load()
	if parts == nil {
		return
	}
	for g, u := range *parts {
		if u == nil || u.led.Load() != nil || !u.dirty.Swap(false) {
			continue
		}
		c.recount(uint16(g), u)
	}
}

// recount counts partition g again into u, whose dirty mark the caller
// has cleared (so an entry applied meanwhile marks it again); a count
// that fails marks it for the next.
func (c *clusterState) recount(g uint16, u *partUsage) {
	rc, err := c.countPartition(g)
	if err != nil {
		u.dirty.Store(true)
		c.e.log.Warn("jetstream partition usage not counted", "group", g, "err", err)
		return
	}
	u.counted.Store(rc)
}

// countPartition reads what partition g's streams hold from their state
// summaries (one scan of the partition's catalog range) and counts each
// stream's consumers by their records' keys.
func (c *clusterState) countPartition(g uint16) (*replicaCount, error) {
	lo, hi := uint64(g)<<partitionShift, uint64(g+1)<<partitionShift
	rc := &replicaCount{}
	st := c.e.opts.Store
	err := st.StreamsIn(lo, hi, func(info store.StreamInfo) error {
		n, err := st.ConsumerCount(info.ID)
		if err != nil {
			return err
		}
		rc.streams++
		rc.consumers += n
		rc.msgs += info.State.Msgs
		rc.bytes += info.State.Bytes
		if a := c.catalog.byIDOf(info.ID); a != nil && a.Config != nil && a.Config.Storage == api.MemoryStorage {
			rc.memory += info.State.Bytes
		}
		return nil
	})
	return rc, err
}

// countLoop counts the followed partitions again while the cluster
// state runs, as often as replicaCountMin and replicaCountShare allow.
func (c *clusterState) countLoop() {
	defer c.wg.Done()
	t := time.NewTimer(replicaCountMin)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		began := time.Now()
		c.countReplicas()
		t.Reset(min(max(replicaCountShare*time.Since(began), replicaCountMin), replicaCountMax))
	}
}

// addUsage registers partition g's share of the store; FSM calls it as
// it makes the partition's state machine, before any group runs.
func (c *clusterState) addUsage(g uint16) *partUsage {
	u := &partUsage{}
	u.dirty.Store(true)
	for {
		old := c.usages.Load()
		var parts []*partUsage
		if old != nil {
			parts = append(parts, *old...)
		}
		for len(parts) <= int(g) {
			parts = append(parts, nil)
		}
		if parts[g] != nil {
			return parts[g]
		}
		parts[g] = u
		if c.usages.CompareAndSwap(old, &parts) {
			return u
		}
	}
}

// fileStoreUsed is what this node's file store holds: its R1 streams and,
// on a cluster, every partition (see partitionsUsed).
func (e *Engine) fileStoreUsed() int64 {
	n := e.file.used.Load()
	if e.cl != nil {
		n += e.cl.partitionsUsed()
	}
	return n
}
