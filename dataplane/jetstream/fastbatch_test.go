package jetstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// fastReplies gathers every reply under prefix, in arrival order.
type fastReplies struct {
	mu  sync.Mutex
	got []string
	end chan string
}

func listenFast(t *testing.T, acc *fakeAccount, prefix string) *fastReplies {
	fr := &fastReplies{end: make(chan string, 16)}
	unsub, _ := acc.SubscribeInternal(prefix+".>", func(_, _, _, msg []byte) {
		fr.mu.Lock()
		fr.got = append(fr.got, string(msg))
		fr.mu.Unlock()
		if strings.Contains(string(msg), `"stream"`) {
			fr.end <- string(msg)
		}
	})
	t.Cleanup(unsub)
	return fr
}

// fastPub publishes one fast batch message.
func fastPub(acc *fakeAccount, prefix, subj, id string, flow int, gap string, seq, op int) {
	acc.Publish(subj, fmt.Sprintf("%s.%s.%d.%s.%d.%d.$FI", prefix, id, flow, gap, seq, op), nil, []byte(fmt.Sprint(seq)))
}

func (fr *fastReplies) waitEnd(t *testing.T) api.PubAckResponse {
	t.Helper()
	select {
	case s := <-fr.end:
		var ack api.PubAckResponse
		if err := json.Unmarshal([]byte(s), &ack); err != nil {
			t.Fatal(err)
		}
		return ack
	case <-time.After(10 * time.Second):
		t.Fatal("no end of batch")
	}
	return api.PubAckResponse{}
}

func TestFastBatchFlow(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "F", Subjects: []string{"f.>"}, AllowBatchPublish: true})
	fr := listenFast(t, acc, "fr")
	for i := 1; i <= 25; i++ {
		op := fastOpAppend
		switch {
		case i == 1:
			op = fastOpStart
		case i == 25:
			op = fastOpCommit
		}
		fastPub(acc, "fr", "f.a", "b1", 10, "fail", i, op)
	}
	ack := fr.waitEnd(t)
	if ack.Error != nil || ack.Sequence != 25 || ack.BatchID != "b1" || ack.BatchSize != 25 {
		t.Fatalf("end %+v", ack)
	}
	fr.mu.Lock()
	got := strings.Join(fr.got, " ")
	fr.mu.Unlock()
	for _, want := range []string{`{"type":"ack","seq":0,"msgs":10}`, `{"type":"ack","seq":10,"msgs":10}`, `{"type":"ack","seq":20,"msgs":10}`} {
		if !strings.Contains(got, want) {
			t.Errorf("replies %s lack %s", got, want)
		}
	}
	if n := streamMsgs(t, acc, "F"); n != 25 {
		t.Fatalf("%d stored", n)
	}

	// A gap in "fail" mode ends the batch with what came before it; the
	// batch is then unknown.
	fr = listenFast(t, acc, "gr")
	fastPub(acc, "gr", "f.a", "b2", 10, "fail", 1, fastOpStart)
	fastPub(acc, "gr", "f.a", "b2", 10, "fail", 3, fastOpAppend)
	if ack := fr.waitEnd(t); ack.Error != nil || ack.BatchSize != 1 || ack.Sequence != 26 {
		t.Fatalf("gap end %+v", ack)
	}
	fastPub(acc, "gr", "f.a", "b2", 10, "fail", 4, fastOpCommit)
	if ack := fr.waitEnd(t); ack.Error == nil || ack.Error.ErrCode != api.CodeBatchPublishUnknownBatchID {
		t.Fatalf("after the end %+v", ack)
	}
	if n := streamMsgs(t, acc, "F"); n != 26 {
		t.Fatalf("%d stored", n)
	}
}

// TestClusterFastBatch: a fast batch into an R3 stream is acknowledged
// once replicated, and every replica holds it.
func TestClusterFastBatch(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.F", api.StreamConfig{Name: "F", Subjects: []string{"f.>"}, Replicas: 3, AllowBatchPublish: true}, &resp)
	if resp.Error != nil {
		t.Fatalf("create: %v", resp.Error)
	}
	asg := waitAssigned(t, nodes, "A", "F")
	if ack := publishOnce(t, acc, "f.x", "plain"); ack.Error != nil {
		t.Fatalf("publish: %v", ack.Error)
	}
	fr := listenFast(t, acc, "cr")
	for i := 1; i <= 40; i++ {
		op := fastOpAppend
		switch {
		case i == 1:
			op = fastOpStart
		case i == 40:
			op = fastOpCommit
		}
		fastPub(acc, "cr", "f.a", "c1", 8, "fail", i, op)
	}
	if ack := fr.waitEnd(t); ack.Error != nil || ack.Sequence != 41 || ack.BatchSize != 40 {
		t.Fatalf("end %+v", ack)
	}
	lead := leaderOf(nodes, asg.group())
	want := streamDigest(t, lead.st, asg.ID)
	for _, nd := range nodes {
		waitForCond(t, nd.name+" caught up", func() bool {
			d, ok := replicaDigest(nd.st, asg.ID)
			return ok && string(d) == string(want)
		})
	}
}

// TestFastBatchRepliesIntoOwnStream: replies whose subjects the stream
// itself captures are published outside the stream's locks (a capture
// takes them): the batch completes, and the replies are stored too.
func TestFastBatchRepliesIntoOwnStream(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "F", Subjects: []string{"f.>"}, AllowBatchPublish: true})
	fr := listenFast(t, acc, "f.r")
	for i := 1; i <= 5; i++ {
		op := fastOpAppend
		switch {
		case i == 1:
			op = fastOpStart
		case i == 5:
			op = fastOpCommit
		}
		fastPub(acc, "f.r", "f.a", "own", 2, "fail", i, op)
	}
	if ack := fr.waitEnd(t); ack.Error != nil || ack.BatchSize != 5 {
		t.Fatalf("end %+v", ack)
	}
	waitForCond(t, "the replies stored", func() bool { return streamMsgs(t, acc, "F") > 5 })
}
