package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// A group's raft id on a node is the node's name for the incarnation
// that bootstrapped the cluster, and name#<16 hex digits> for every later
// one. A node that lost a group's state must never reuse the id its old
// state voted under (its old votes and acknowledgements are gone, so a
// reused id could vote twice in one term or count toward a quorum for
// entries it no longer holds); a random incarnation is unique without
// asking anyone.

// Keys this package keeps in each group's StableStore, beside raft's own.
var (
	// StableKeyServerID holds the group's raft id on this node.
	StableKeyServerID = []byte("contrail.server_id")
	// StableKeyRepair is 1 while the group is in repair. It is set before
	// the rejoining incarnation starts and cleared once it is a voter, so
	// a restart in the middle of a repair stays in repair.
	StableKeyRepair = []byte("contrail.repair")
)

// nodeName is the node part of a raft id.
func nodeName(id raft.ServerID) string {
	name, _, _ := strings.Cut(string(id), "#")
	return name
}

// newIncarnation returns a fresh raft id for node name.
func newIncarnation(name string) raft.ServerID {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("cluster: random incarnation: %v", err))
	}
	return raft.ServerID(name + "#" + hex.EncodeToString(b[:]))
}

// notFound reports whether err is a StableStore's "no such key". The
// hashicorp stores say it in words only (raft's own HasExistingState
// compares the text too).
func notFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not found")
}

func storedID(s raft.StableStore) (raft.ServerID, error) {
	v, err := s.Get(StableKeyServerID)
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read server id: %w", err)
	}
	return raft.ServerID(v), nil
}

func storedRepair(s raft.StableStore) (bool, error) {
	v, err := s.GetUint64(StableKeyRepair)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read repair marker: %w", err)
	}
	return v == 1, nil
}

// persistStart records, before the group's raft starts, the id it runs
// as and whether it is in repair. The marker is written first: the two
// are separate writes, and a crash between them must not leave a new
// incarnation's id without its marker, or the group would start under
// that id out of repair (vote gate open, no rejoin asking the leader to
// admit it) and never rejoin. A marker without an id is safe: a group
// with no stored id asks its peers again, and rejoins as a fresh
// incarnation.
func persistStart(s raft.StableStore, id raft.ServerID, repair bool) error {
	var v uint64
	if repair {
		v = 1
	}
	if err := s.SetUint64(StableKeyRepair, v); err != nil {
		return fmt.Errorf("store repair marker: %w", err)
	}
	if err := s.Set(StableKeyServerID, []byte(id)); err != nil {
		return fmt.Errorf("store server id: %w", err)
	}
	return nil
}
