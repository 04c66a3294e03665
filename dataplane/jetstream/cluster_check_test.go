package jetstream

import (
	"fmt"
	"testing"

	"github.com/contrail/contrail/dataplane/store"
)

// checkCluster is three in-process nodes with an R3 stream of 20
// messages applied on every member: the partition's copies agree.
func checkCluster(t *testing.T) (nodes []*testNode, asg *assignment) {
	t.Helper()
	acc := newFakeAccount("A")
	nodes = startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	asg = createR3(t, acc, nodes, "S", "s.>")
	for i := 1; i <= 20; i++ {
		if ack := publishOnce(t, acc, "s.x", fmt.Sprint(i)); ack.Error != nil {
			t.Fatalf("publish %d: %v", i, ack.Error)
		}
	}
	return nodes, asg
}

// stray writes a message no entry carried into nd's copy of the stream,
// as a bug or a bad disk would.
func stray(t *testing.T, nd *testNode, id uint64, data string) {
	t.Helper()
	b := nd.st.NewBatch()
	defer b.Close()
	b.PutMsg(id, &store.Message{Seq: 1000, Subject: "s.stray", Data: []byte(data), Time: 1})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// check runs one digest check of g on its leader. Members still behind
// the marker answer once they have applied it.
func check(t *testing.T, nodes []*testNode, g uint16) error {
	t.Helper()
	l := leaderOf(nodes, g)
	if l == nil {
		t.Fatalf("no leader for partition %d", g)
	}
	return l.e.cl.checkPartition(g)
}

// The digest check repairs exactly the copy that differs from the
// majority: a follower's, the leader's, or none when all three differ;
// copies that agree are left alone, and the marker changes no stream.
func TestDigestCheckRepairsTheOddCopy(t *testing.T) {
	t.Run("agree", func(t *testing.T) {
		nodes, asg := checkCluster(t)
		if err := check(t, nodes, asg.group()); err != nil {
			t.Fatal(err)
		}
		for _, nd := range nodes {
			if n := nd.repairs(asg.group()); n != 0 {
				t.Fatalf("%s asked to repair %d times, its copy agrees", nd.name, n)
			}
			d, err := nd.e.StreamDigest("A", "S")
			if err != nil || d.Msgs != 20 {
				t.Fatalf("%s after the check: %+v, %v", nd.name, d, err)
			}
		}
	})
	t.Run("follower", func(t *testing.T) {
		nodes, asg := checkCluster(t)
		l := leaderOf(nodes, asg.group())
		var odd *testNode
		for _, nd := range nodes {
			if nd != l {
				odd = nd
				break
			}
		}
		stray(t, odd, asg.ID, "rot")
		if err := check(t, nodes, asg.group()); err != nil {
			t.Fatal(err)
		}
		waitForCond(t, odd.name+" asked to repair", func() bool { return odd.repairs(asg.group()) == 1 })
		for _, nd := range nodes {
			if nd != odd && nd.repairs(asg.group()) != 0 {
				t.Fatalf("%s asked to repair a copy that agrees", nd.name)
			}
		}
		// A request to repair a copy that agrees is refused by the
		// copy itself.
		d := leaderDigest(t, l, asg.group())
		for _, nd := range nodes {
			if nd == odd || nd == l {
				continue
			}
			if _, err := nd.e.cl.serveRepair(l.name, asg.group(), []byte(fmt.Sprintf(`{"index":%d,"sum":%q}`, d.Index, d.Sum))); err == nil {
				t.Fatalf("%s accepted a repair of a copy that agrees", nd.name)
			}
		}
	})
	t.Run("leader", func(t *testing.T) {
		nodes, asg := checkCluster(t)
		l := leaderOf(nodes, asg.group())
		stray(t, l, asg.ID, "rot")
		if err := check(t, nodes, asg.group()); err != nil {
			t.Fatal(err)
		}
		waitForCond(t, "the leader's own repair", func() bool { return l.repairs(asg.group()) == 1 })
	})
	t.Run("no majority", func(t *testing.T) {
		nodes, asg := checkCluster(t)
		for i, nd := range nodes[1:] {
			stray(t, nd, asg.ID, fmt.Sprint("rot", i))
		}
		if err := check(t, nodes, asg.group()); err == nil {
			t.Fatal("a verdict with every copy different")
		}
		for _, nd := range nodes {
			if nd.repairs(asg.group()) != 0 {
				t.Fatalf("%s asked to repair with no majority", nd.name)
			}
		}
	})
}

// leaderDigest is the leader's latest digest of g.
func leaderDigest(t *testing.T, l *testNode, g uint16) *partitionDigest {
	t.Helper()
	d := l.e.cl.digests
	d.mu.Lock()
	defer d.mu.Unlock()
	pd := d.latest[g]
	if pd == nil {
		t.Fatalf("%s has no digest of partition %d", l.name, g)
	}
	return pd
}

// TestVerdict: the majority is of the group's members, not of those that
// answered; copies that cannot be read are divergent, never good.
func TestVerdict(t *testing.T) {
	members := []string{"a", "b", "c"}
	pd := func(sum string) *partitionDigest { return &partitionDigest{Sum: sum} }
	for _, tc := range []struct {
		name      string
		answers   map[string]*partitionDigest
		good      string
		divergent []string
	}{
		{"all agree", map[string]*partitionDigest{"a": pd("x"), "b": pd("x"), "c": pd("x")}, "x", nil},
		{"one odd", map[string]*partitionDigest{"a": pd("x"), "b": pd("y"), "c": pd("x")}, "x", []string{"b"}},
		{"one silent", map[string]*partitionDigest{"a": pd("x"), "c": pd("x")}, "x", nil},
		{"two answers differ", map[string]*partitionDigest{"a": pd("x"), "c": pd("y")}, "", nil},
		{"one alone", map[string]*partitionDigest{"a": pd("x")}, "", nil},
		{"unreadable", map[string]*partitionDigest{"a": pd("x"), "b": {Err: "corrupt"}, "c": pd("x")}, "x", []string{"b"}},
		{"all differ", map[string]*partitionDigest{"a": pd("x"), "b": pd("y"), "c": pd("z")}, "", nil},
	} {
		good, div := verdict(members, tc.answers)
		if good != tc.good || fmt.Sprint(div) != fmt.Sprint(tc.divergent) {
			t.Errorf("%s: good %q divergent %v, want %q %v", tc.name, good, div, tc.good, tc.divergent)
		}
	}
}
