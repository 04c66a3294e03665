package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// incrHdr is a header block carrying Nats-Incr: v and the extra pairs.
func incrHdr(v string, kv ...string) []byte {
	return appendHeaderBlock(nil, "", append([]string{api.HeaderIncr, v}, kv...)...)
}

// lastMsg reads the stream's last message on subj through the API.
func lastMsg(t *testing.T, acc *fakeAccount, stream, subj string) api.StoredMsg {
	t.Helper()
	var resp api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET."+stream, api.MsgGetRequest{LastFor: subj}, &resp)
	if resp.Error != nil || resp.Message == nil {
		t.Fatalf("last for %s: %v", subj, resp.Error)
	}
	return *resp.Message
}

func TestCounterIncrements(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c.>"}, AllowMsgCounter: true})
	huge := new(big.Int).Lsh(big.NewInt(1), 100) // past int64 and uint64
	longest := strings.Repeat("9", maxIncrLen)
	steps := []struct {
		subj, incr, want string
	}{
		{"c.a", "1", "1"},
		{"c.a", "41", "42"},
		{"c.b", "-5", "-5"},
		{"c.a", "-50", "-8"},
		{"c.a", "+8", "0"},
		{"c.b", huge.String(), new(big.Int).Sub(huge, big.NewInt(5)).String()},
		{"c.b", huge.String(), new(big.Int).Sub(new(big.Int).Lsh(huge, 1), big.NewInt(5)).String()},
		{"c.e", longest, longest},
		{"c.e", "-" + longest[1:], "9" + strings.Repeat("0", maxIncrLen-1)}, // the sign counts too
	}
	for i, st := range steps {
		ack := publish(t, acc, st.subj, incrHdr(st.incr), nil)
		if ack.Error != nil || ack.PubAck == nil || ack.PubAck.Sequence != uint64(i+1) || ack.PubAck.Value != st.want {
			t.Fatalf("step %d (%s += %s): %+v %v, want val %s", i, st.subj, st.incr, ack.PubAck, ack.Error, st.want)
		}
	}
	m := lastMsg(t, acc, "C", "c.b")
	var cv counterValue
	if err := json.Unmarshal(m.Data, &cv); err != nil || cv.Value != steps[6].want { // c.b's last
		t.Fatalf("stored body %q: %v", m.Data, err)
	}
	if string(m.Data) != `{"val":"`+cv.Value+`"}` {
		t.Fatalf("stored body %q is not nats-server's shape", m.Data)
	}
	if v := headerValue(m.Header, api.HeaderIncr); string(v) != huge.String() {
		t.Fatalf("stored Nats-Incr %q", v)
	}
	// A deduplicated increment counts once, and its ack has no total.
	id := []string{api.HeaderMsgID, "x"}
	first := publish(t, acc, "c.d", incrHdr("3", id...), nil)
	dup := publish(t, acc, "c.d", incrHdr("3", id...), nil)
	if first.PubAck.Value != "3" || !dup.PubAck.Duplicate || dup.PubAck.Value != "" || dup.PubAck.Sequence != first.PubAck.Sequence {
		t.Fatalf("dedup: first %+v, dup %+v", first.PubAck, dup.PubAck)
	}
}

func TestCounterRefusals(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c.>"}, AllowMsgCounter: true})
	createStream(t, acc, api.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	cases := []struct {
		name string
		subj string
		hdr  []byte
		data []byte
		code api.ErrorCode
	}{
		{"no increment", "c.a", nil, nil, api.CodeCounterIncrementMissing},
		{"other headers only", "c.a", appendHeaderBlock(nil, "", "X", "1"), nil, api.CodeCounterIncrementMissing},
		{"not an integer", "c.a", incrHdr("1.5"), nil, api.CodeCounterIncrementInvalid},
		{"hex", "c.a", incrHdr("0x10"), nil, api.CodeCounterIncrementInvalid},
		{"too long", "c.a", incrHdr(strings.Repeat("9", maxIncrLen+1)), nil, api.CodeCounterIncrementInvalid},
		{"body", "c.a", incrHdr("1"), []byte("x"), api.CodeCounterHasPayload},
		{"rollup", "c.a", incrHdr("1", api.HeaderRollup, "sub"), nil, api.CodeCounterIncrementInvalid},
		{"expected stream", "c.a", incrHdr("1", api.HeaderExpectedStream, "C"), nil, api.CodeCounterIncrementInvalid},
		{"expected last seq", "c.a", incrHdr("1", api.HeaderExpectedLastSeq, "0"), nil, api.CodeCounterIncrementInvalid},
		{"expected subject seq", "c.a", incrHdr("1", api.HeaderExpectedLastSubjSeq, "0"), nil, api.CodeCounterIncrementInvalid},
		{"expected msg id", "c.a", incrHdr("1", api.HeaderExpectedLastMsgID, "x"), nil, api.CodeCounterIncrementInvalid},
		{"not a counter stream", "p.a", incrHdr("1"), nil, api.CodeCounterDisabled},
		{"invalid, not a counter stream", "p.a", incrHdr("one"), nil, api.CodeCounterIncrementInvalid},
		{"body, not a counter stream", "p.a", incrHdr("1"), []byte("x"), api.CodeCounterDisabled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ack := publish(t, acc, tc.subj, tc.hdr, tc.data)
			if ack.Error == nil || ack.Error.ErrCode != tc.code {
				t.Fatalf("got %+v %+v, want err_code %d", ack.PubAck, ack.Error, tc.code)
			}
		})
	}
	var info api.StreamInfoResponse
	for _, name := range []string{"C", "P"} {
		acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &info)
		if info.State.Msgs != 0 {
			t.Fatalf("stream %s stored a refused publish: %+v", name, info.State)
		}
	}
}

// TestCounterConcurrent increments one counter from many publishers at
// once: the totals are computed in the apply, so none is lost and every
// ack's total is distinct.
func TestCounterConcurrent(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	vals := make(chan string, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var ack api.PubAckResponse
				b, ok := requestVia(acc, fmt.Sprintf("_INBOX.w%d.%d", w, i), "c", incrHdr("2"))
				if !ok || json.Unmarshal(b, &ack) != nil || ack.PubAck == nil {
					vals <- "error: " + string(b)
					continue
				}
				vals <- ack.PubAck.Value
			}
		}(w)
	}
	wg.Wait()
	close(vals)
	seen := map[string]bool{}
	for v := range vals {
		if seen[v] {
			t.Fatalf("total %q acknowledged twice", v)
		}
		seen[v] = true
	}
	for i := 1; i <= workers*each; i++ {
		if !seen[fmt.Sprint(2*i)] {
			t.Fatalf("no ack with total %d", 2*i)
		}
	}
}

// requestVia publishes to subj with its own reply subject, so concurrent
// requests to one subject get their own replies.
func requestVia(acc *fakeAccount, inbox, subj string, hdr []byte) ([]byte, bool) {
	ch := make(chan []byte, 1)
	unsub, _ := acc.SubscribeInternal(inbox, func(_, _, _, msg []byte) {
		select {
		case ch <- append([]byte(nil), msg...):
		default:
		}
	})
	defer unsub()
	acc.Publish(subj, inbox, hdr, nil)
	select {
	case b := <-ch:
		return b, true
	case <-time.After(10 * time.Second):
		return nil, false
	}
}

// TestCounterSurvivesRestart reopens the store: the total is the last
// stored message, so it continues where it was.
func TestCounterSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	_, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true, MaxMsgsPer: 1})
	for i := 0; i < 3; i++ {
		publish(t, acc, "c", incrHdr("10"), nil)
	}
	closeAll()
	_, acc, _ = openEngine(t, fs)
	ack := publish(t, acc, "c", incrHdr("1"), nil)
	if ack.Error != nil || ack.PubAck.Value != "31" || ack.PubAck.Sequence != 4 {
		t.Fatalf("after restart: %+v %v", ack.PubAck, ack.Error)
	}
}

// TestCounterAfterDelete: deleting a subject's last total makes the one
// before it the counter's value, as on nats-server (the total is whatever
// the subject's newest message says).
func TestCounterAfterDelete(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true})
	publish(t, acc, "c", incrHdr("1"), nil)
	publish(t, acc, "c", incrHdr("5"), nil)
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.C", api.MsgDeleteRequest{Seq: 2}, &del)
	if del.Error != nil {
		t.Fatal(del.Error)
	}
	if ack := publish(t, acc, "c", incrHdr("1"), nil); ack.PubAck.Value != "2" {
		t.Fatalf("after delete: %+v", ack.PubAck)
	}
	var purge api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.C", nil, &purge)
	if ack := publish(t, acc, "c", incrHdr("1"), nil); ack.PubAck.Value != "1" {
		t.Fatalf("after purge: %+v", ack.PubAck)
	}
}

func TestCounterCarriesSources(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c"}, AllowMsgCounter: true})
	// A client-written sources header is kept verbatim, then rewritten
	// (compact JSON) into every later total, as nats-server does.
	publish(t, acc, "c", incrHdr("1", api.HeaderCounterSources, `{"S": {"s.a": "4"}}`), nil)
	publish(t, acc, "c", incrHdr("1"), nil)
	if v := headerValue(lastMsg(t, acc, "C", "c").Header, api.HeaderCounterSources); string(v) != `{"S":{"s.a":"4"}}` {
		t.Fatalf("sources header %q", v)
	}
	// The carried header replaces one the client sent.
	publish(t, acc, "c", incrHdr("1", api.HeaderCounterSources, `{}`), nil)
	if v := headerValue(lastMsg(t, acc, "C", "c").Header, api.HeaderCounterSources); string(v) != `{"S":{"s.a":"4"}}` {
		t.Fatalf("sources header %q after a client's", v)
	}
	createStream(t, acc, api.StreamConfig{Name: "D", Subjects: []string{"d"}, AllowMsgCounter: true})
	publish(t, acc, "d", incrHdr("1", api.HeaderCounterSources, `not json`), nil)
	if ack := publish(t, acc, "d", incrHdr("1"), nil); ack.Error == nil || ack.Error.ErrCode != api.CodeCounterBroken {
		t.Fatalf("broken sources: %+v %v", ack.PubAck, ack.Error)
	}
}

func TestCounterReplicated(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.C", api.StreamConfig{Name: "C", Subjects: []string{"c"}, Replicas: 3, AllowMsgCounter: true}, &resp)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	asg := waitAssigned(t, nodes, "A", "C")
	g := asg.group()
	incr := func(n int, want string) {
		t.Helper()
		hdr := incrHdr("1", api.HeaderMsgID, fmt.Sprintf("i%d", n))
		for try := 0; try < 10; try++ {
			b, ok := acc.tryRequest("c", hdr, nil, 10*time.Second)
			if !ok || len(b) == 0 {
				continue // fate unknown: send again, the id dedups it
			}
			var ack api.PubAckResponse
			if err := json.Unmarshal(b, &ack); err != nil || ack.Error != nil {
				t.Fatalf("increment %d: %s", n, b)
			}
			if !ack.PubAck.Duplicate && ack.PubAck.Value != want {
				t.Fatalf("increment %d: total %q, want %s", n, ack.PubAck.Value, want)
			}
			return
		}
		t.Fatalf("increment %d never acknowledged", n)
	}
	for i := 1; i <= 20; i++ {
		incr(i, fmt.Sprint(i))
	}
	first := leaderOf(nodes, g)
	want := streamDigest(t, first.st, asg.ID)
	for _, nd := range nodes {
		waitForCond(t, nd.name+" caught up", func() bool { return bytes.Equal(streamDigest(t, nd.st, asg.ID), want) })
	}
	first.stop()
	waitForCond(t, "a new partition leader", func() bool { return leaderOf(nodes, g) != nil })
	for i := 21; i <= 25; i++ {
		incr(i, fmt.Sprint(i))
	}
	m := lastMsg(t, acc, "C", "c")
	if string(m.Data) != `{"val":"25"}` {
		t.Fatalf("total after failover: %q", m.Data)
	}
}

func TestSetHeader(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "NATS/1.0\r\nK: v\r\n\r\n"},
		{"NATS/1.0\r\nA: 1\r\n\r\n", "NATS/1.0\r\nA: 1\r\nK: v\r\n\r\n"},
		{"NATS/1.0\r\nK: old value\r\nB: 2\r\n\r\n", "NATS/1.0\r\nK: v\r\nB: 2\r\n\r\n"},
		{"NATS/1.0\r\nKK: 1\r\nK:x\r\n\r\n", "NATS/1.0\r\nKK: 1\r\nK: v\r\n\r\n"},
	}
	for _, tc := range cases {
		in := []byte(tc.in)
		if got := string(setHeader(in, "K", "v")); got != tc.want {
			t.Errorf("setHeader(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("setHeader changed its input %q", tc.in)
		}
	}
}

// TestCounterSourcesTake: a sourced total adds its difference from the
// one last taken from the same origin and subject, so a total seen again
// (a redelivery after a restart) adds nothing, and a broken body is
// refused.
func TestCounterSourcesTake(t *testing.T) {
	var cs counterSources
	steps := []struct {
		src, subj, body, want string
	}{
		{"A 1 > > a.x", "agg.x", `{"val":"5"}`, "5"},
		{"A 2 > > a.x", "agg.x", `{"val":"7"}`, "2"},
		{"A 2 > > a.x", "agg.x", `{"val":"7"}`, "0"},
		{"B 1 > > b.x", "agg.x", `{"val":"-3"}`, "-3"},
		{"A 3", "agg.y", `{"val":"1"}`, "1"}, // no origin subject: ours stands in
	}
	for _, st := range steps {
		got, err := cs.take(st.src, st.subj, []byte(st.body))
		if err != nil || got.String() != st.want {
			t.Fatalf("take(%q, %s): %v, %v; want %s", st.src, st.body, got, err, st.want)
		}
	}
	b, _ := json.Marshal(cs)
	if want := `{"A":{"a.x":"7","agg.y":"1"},"B":{"b.x":"-3"}}`; string(b) != want {
		t.Fatalf("sources %s, want %s", b, want)
	}
	for _, body := range []string{`x`, `{"val":"1.5"}`, `{"val":"` + strings.Repeat("9", 3*maxIncrLen) + `"}`} {
		if _, err := cs.take("A 4 > > a.x", "agg.x", []byte(body)); err == nil {
			t.Fatalf("take(%.20s) accepted", body)
		}
	}
}
