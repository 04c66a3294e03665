package jetstream

import (
	"strconv"
	"testing"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/hashicorp/raft"
)

// TestClusterSourceEntryLostIsReadAgain: an R3 stream sourcing through a
// flow_control durable whose partition loses an entry after its leader's
// apply step took a sourced message (raft refuses the entry) does not
// acknowledge that message to the origin. The partition's next leader
// resets the consumer, which delivers it again, and the stream ends with
// every origin message exactly once. With max_ack_pending 1 a flow
// control request follows every delivery, so an answer naming the lost
// message would be sent at once (as it was when any API error counted as
// taken, or when the progress the apply step had moved in memory did).
func TestClusterSourceEntryLostIsReadAgain(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 1, acc)
	waitClusterReady(t, nodes)
	// ORIGIN is R1: no raft entry of its own for the failure to hit.
	createClustered(t, acc, api.StreamConfig{Name: "ORIGIN", Subjects: []string{"o"}, Replicas: 1})
	var cr api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.CREATE.ORIGIN.SC", api.ConsumerCreateRequest{Stream: "ORIGIN", Config: api.ConsumerConfig{
		Durable: "SC", DeliverSubject: "dsrc.sc", AckPolicy: api.AckFlowControl, MaxAckPending: 1,
		FlowControl: true, Heartbeat: sourceHeartbeat}}, &cr)
	if cr.Error != nil {
		t.Fatalf("consumer create: %v", cr.Error)
	}
	createClustered(t, acc, api.StreamConfig{Name: "S", Replicas: 3, Sources: []*api.StreamSource{{Name: "ORIGIN",
		Consumer: &api.StreamSourceDurable{Name: "SC", DeliverSubject: "dsrc.sc"}}}})
	g := waitAssigned(t, nodes, "A", "S").group()
	// onLeader is stream S on its partition's current leader, or nil.
	onLeader := func() *stream {
		if nd := leaderOf(nodes, g); nd != nil {
			return nd.e.account("A").lookup("S")
		}
		return nil
	}
	// held is S as it last held 1..n durably on its leader (holds).
	var held *stream
	holds := func(n uint64) func() bool {
		return func() bool {
			held = onLeader()
			return held != nil && holdsDurably(held, n)
		}
	}
	for i := 1; i <= 3; i++ {
		publishOnce(t, acc, "o", "m"+strconv.Itoa(i))
	}
	waitForCond(t, "S to hold 3", holds(3))

	var lead *testNode
	waitForCond(t, "S's leader", func() bool { lead = leaderOf(nodes, g); return lead != nil })
	refused := error(raft.ErrNotLeader)
	lead.failApply.Store(&refused)
	publishOnce(t, acc, "o", "m4")
	waitForCond(t, "the refused entry", func() bool { return lead.failApply.Load() == nil })
	publishOnce(t, acc, "o", "m5")
	waitForCond(t, "S to hold 1..5", holds(5))
	checkSourcedInOrder(t, held, 5)
}
