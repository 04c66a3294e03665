package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster"
	"github.com/contrail/contrail/dataplane/cluster/mux"
	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/store"
)

// clustered reports whether the options make this node a member of a
// JetStream cluster: a cluster block with peers besides this node.
func clustered(opts *config.Options) bool {
	return opts.Cluster != nil && len(opts.Cluster.Peers) > 1
}

// checkPartitions refuses a store made by a cluster with more partitions
// than this node runs. The count is fixed when a cluster is created: the
// streams of a group past it would be carried by no group here.
func checkPartitions(st *store.Store) error {
	past := uint16(cluster.DefaultPartitions + 1)
	has, err := st.HasState(past)
	if err != nil {
		return err
	}
	if has {
		return fmt.Errorf("jetstream cluster: the data dir holds raft group %d, but this node runs %d partitions: it belongs to a cluster created with more (run it with the version that created it, or start this node on an empty data dir)", past, cluster.DefaultPartitions)
	}
	return nil
}

// startRaft starts the node's raft groups (meta and partitions) on the
// cluster port, their logs and state in the node's store, and connects
// the engine to them.
func startRaft(opts *config.Options, cport *mux.Mux, st *store.Store, engine *jetstream.Engine, log *slog.Logger) (*cluster.Node, error) {
	peers := map[string]string{}
	var names []string
	for _, p := range opts.Cluster.Peers {
		if p.ID == "" {
			return nil, fmt.Errorf("jetstream cluster: every peer needs a name (--peers n1=host:port,… or \"NAME=nats-route://…\" in the cluster block's routes), or turn JetStream off; %s has none", p.Addr)
		}
		peers[p.ID] = p.Addr
		names = append(names, p.ID)
	}
	self := opts.NodeID()
	if _, ok := peers[self]; !ok {
		return nil, fmt.Errorf("jetstream cluster: this node (%q) is not among the peers", self)
	}
	if err := checkPartitions(st); err != nil {
		return nil, err
	}
	// Open, wire, then Run: the engine's state machines ask the node who
	// leads while they apply, so the engine holds the node before any
	// group applies an entry or changes leader.
	node, err := cluster.Open(cluster.Config{
		Name:  self,
		Peers: peers,
		Mux:   cport,
		Open: func(g uint16) (raft.FSM, raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
			// A snapshot install cut short left the group's records
			// half replaced: this copy is discarded, and the group
			// rejoins as on a node that never had it.
			if broken, err := st.NeedsRepair(g); broken {
				log.Warn("raft group's state is marked for repair: discarding it to rejoin", "group", g, "err", err)
				if err := st.ResetGroup(g); err != nil {
					return nil, nil, nil, nil, err
				}
			}
			fsm, err := engine.FSM(g)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			rl, err := st.RaftLog(g)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			logs, err := rl.Cached(store.LogCacheEntries, store.LogCacheBytes)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			return fsm, logs, rl, st.SnapshotStore(g), nil
		},
		Reset:            st.ResetGroup,
		Log:              log.With("component", "raft"),
		TimingMultiplier: max(opts.Cluster.RaftMultiplier, 1),
	})
	if err != nil {
		return nil, err
	}
	for _, g := range node.Groups() {
		g.OnLeader(func(leader bool) { engine.LeaderChanged(g.ID(), leader) })
		g.OnHandOver(func(wait time.Duration) func(error) { return engine.HandOver(g.ID(), wait) })
	}
	name := opts.Cluster.Name
	if name == "" {
		name = config.DefaultClusterName
	}
	if err := engine.StartCluster(replication{node: node, name: name, peers: names}); err != nil {
		node.Close()
		return nil, err
	}
	if err := node.Run(); err != nil {
		return nil, err
	}
	return node, nil
}

// stopRaft hands this node's leaderships to the others, then stops its
// groups, so a planned stop costs clients no election wait.
func stopRaft(node *cluster.Node, log *slog.Logger) {
	// Bounded: when the peers stop too (a whole cluster shut down), no
	// transfer can succeed, and the stop must not wait on each.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := node.Shutdown(ctx); err != nil && !errors.Is(err, cluster.ErrClosed) {
		log.Warn("raft shutdown", "err", err)
	}
}

// replication is the engine's view of a cluster.Node.
type replication struct {
	node  *cluster.Node
	name  string
	peers []string
}

func (r replication) NodeID() string      { return r.node.Name() }
func (r replication) ClusterName() string { return r.name }
func (r replication) Peers() []string     { return r.peers }
func (r replication) Partitions() int     { return len(r.node.Groups()) - 1 }
func (r replication) Group(g uint16) jetstream.ReplicaGroup {
	return replicaGroup{r.node.Group(g)}
}
func (r replication) Call(node, op string, group uint16, body []byte) ([]byte, error) {
	return r.node.Call(node, op, group, body)
}
func (r replication) Handle(op string, fn func(from string, group uint16, body []byte) ([]byte, error)) {
	r.node.Handle(op, func(from string, group uint16, body json.RawMessage) (json.RawMessage, error) {
		return fn(from, group, body)
	})
}

// replicaGroup adapts a cluster.Group to jetstream.ReplicaGroup.
type replicaGroup struct{ g *cluster.Group }

func (rg replicaGroup) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	return rg.g.Apply(data, timeout)
}
func (rg replicaGroup) ApplyMarker(ext []byte, timeout time.Duration) raft.ApplyFuture {
	return rg.g.ApplyLog(raft.Log{Extensions: ext}, timeout)
}
func (rg replicaGroup) Repair() error                       { return rg.g.Repair() }
func (rg replicaGroup) IsLeader() bool                      { return rg.g.IsLeader() }
func (rg replicaGroup) Leader() string                      { return rg.g.Leader() }
func (rg replicaGroup) Barrier(timeout time.Duration) error { return rg.g.Barrier(timeout) }
func (rg replicaGroup) TransferLeadership(to string) error  { return rg.g.TransferLeadership(to) }
func (rg replicaGroup) AwaitOtherLeader(timeout time.Duration) string {
	return rg.g.AwaitOtherLeader(timeout)
}
func (rg replicaGroup) ReadFence(timeout time.Duration) error {
	return rg.g.ReadFence(timeout)
}
func (rg replicaGroup) Replicas() []jetstream.Replica {
	var out []jetstream.Replica
	for _, r := range rg.g.Replicas() {
		out = append(out, jetstream.Replica{Name: r.Name, Current: r.Current, Offline: r.Offline, Active: r.Active, Lag: r.Lag})
	}
	return out
}

// The engine's health checks and membership changes use these
// (jetstream.GroupAdmin).
func (rg replicaGroup) AppliedIndex() uint64           { return rg.g.AppliedIndex() }
func (rg replicaGroup) CommitIndex() uint64            { return rg.g.CommitIndex() }
func (rg replicaGroup) Members() []string              { return rg.g.Members() }
func (rg replicaGroup) RemoveServer(name string) error { return rg.g.RemoveServer(name) }

var _ jetstream.GroupAdmin = replicaGroup{}
