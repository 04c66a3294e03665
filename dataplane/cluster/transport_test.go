package cluster

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// newTestTransport runs a transport for group 5 as server id self on a
// mux of its own; addrs resolves every name to the mux of names[0].
func newTestTransport(t *testing.T, self raft.ServerID, addrs func(string) (string, bool)) (*transport, *mux.Mux) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := mux.New(ln, testLog(), []byte("transport-test"), nil)
	t.Cleanup(func() { m.Close() })
	l, err := m.Listen(mux.KindRaft, 5)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(newStreamLayer(l, 5, self, addrs), 5, newHclog(testLog(), "raft").(*hclogAdapter))
	t.Cleanup(func() { tr.Close() })
	return tr, m
}

// A group in repair answers election requests itself, never passing them
// to raft: votes and pre-votes are not granted, TimeoutNow fails. Out of
// repair they reach raft again. Requests for another server id (an older
// incarnation) are turned away at the connection.
func TestRepairGate(t *testing.T) {
	var target string
	addrs := func(string) (string, bool) { return target, true }
	node, m := newTestTransport(t, "n1#aa", addrs)
	target = m.Addr().String()
	peer, _ := newTestTransport(t, "n2", addrs)

	node.SetRepair(true)
	var vr raft.RequestVoteResponse
	if err := peer.NetworkTransport.RequestVote("n1#aa", "n1#aa", &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte("n2")}, Term: 7}, &vr); err != nil {
		t.Fatal(err)
	}
	if vr.Granted || vr.Term != 7 {
		t.Fatalf("vote in repair: %+v", vr)
	}
	var pr raft.RequestPreVoteResponse
	if err := peer.NetworkTransport.RequestPreVote("n1#aa", "n1#aa", &raft.RequestPreVoteRequest{Term: 8}, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Granted {
		t.Fatalf("pre-vote in repair: %+v", pr)
	}
	var tr raft.TimeoutNowResponse
	if err := peer.TimeoutNow("n1#aa", "n1#aa", &raft.TimeoutNowRequest{}, &tr); err == nil || err.Error() != ErrRepair.Error() {
		t.Fatalf("TimeoutNow in repair: %v", err)
	}
	if got := node.refused.Load(); got != 3 {
		t.Fatalf("refused %d requests, want 3", got)
	}
	select {
	case rpc := <-node.Consumer():
		t.Fatalf("raft was handed %T in repair", rpc.Command)
	default:
	}
	// The node in repair does not ask for votes either.
	if err := node.RequestVote("n2", "n2", &raft.RequestVoteRequest{}, &vr); !errors.Is(err, ErrRepair) {
		t.Fatalf("own vote request in repair: %v", err)
	}

	node.SetRepair(false)
	go func() {
		rpc := <-node.Consumer()
		rpc.Respond(&raft.RequestVoteResponse{Term: 9, Granted: true}, nil)
	}()
	if err := peer.NetworkTransport.RequestVote("n1#aa", "n1#aa", &raft.RequestVoteRequest{Term: 9}, &vr); err != nil || !vr.Granted {
		t.Fatalf("vote out of repair: %+v, %v", vr, err)
	}

	before := node.sl.misdirected.Load()
	if err := peer.NetworkTransport.RequestVote("n1", "n1", &raft.RequestVoteRequest{Term: 10}, &vr); err == nil {
		t.Fatal("a request for the old incarnation was answered")
	}
	waitFor(t, 5*time.Second, "the misdirected connection counted", func() bool { return node.sl.misdirected.Load() > before })
}

// Raft's info lines reach slog with their attributes, formatted values
// formatted; its debug lines do not.
func TestHclogAdapter(t *testing.T) {
	var buf strings.Builder
	lg := newHclog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("group", 3), "raft")
	lg.Debug("noise", "k", 1)
	lg.Named("net").Info("initial configuration", "servers", hclog.Fmt("%+v", []int{1, 2}))
	got := buf.String()
	for _, want := range []string{`msg="initial configuration"`, "group=3", `servers="[1 2]"`, "component=raft.net"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "noise") {
		t.Errorf("debug line logged: %q", got)
	}
}
