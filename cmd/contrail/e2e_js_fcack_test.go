package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ack_policy flow_control: deliveries are acknowledged by the client's
// answers to flow control requests, compared with nats-server.

// fcDeliveries reads what arrives on sub up to the next flow control
// request (heartbeats skipped): one line per message, and the request.
func fcDeliveries(t *testing.T, tg *jsTarget, sub *nats.Subscription) ([]string, *nats.Msg) {
	t.Helper()
	var out []string
	for hbs := 0; ; {
		m, err := sub.NextMsg(ioTimeout)
		if err != nil {
			t.Fatalf("%s: waiting for deliveries: %v", tg.name, err)
		}
		switch m.Header.Get("Status") {
		case "100":
			if m.Reply != "" && m.Header.Get("Description") == "FlowControl Request" {
				return out, m
			}
			// An idle heartbeat: the request should have come by now.
			if hbs++; hbs > 5 {
				t.Fatalf("%s: no flow control request after %v, then heartbeat %v", tg.name, out, m.Header)
			}
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatalf("%s: delivery metadata: %v", tg.name, err)
		}
		// Not num_pending: it depends on how far the publisher got.
		out = append(out, fmt.Sprintf("delivered %s %s seq=%d/%d", m.Subject, m.Data,
			md.Sequence.Stream, md.Sequence.Consumer))
	}
}

// fcReply answers a flow control request naming the last delivery taken.
func fcReply(t *testing.T, tg *jsTarget, req *nats.Msg, dseq, sseq uint64) {
	t.Helper()
	m := nats.NewMsg(req.Reply)
	m.Header.Set("Nats-Last-Consumer", strconv.FormatUint(dseq, 10))
	m.Header.Set("Nats-Last-Stream", strconv.FormatUint(sseq, 10))
	if err := tg.nc.PublishMsg(m); err != nil {
		t.Fatalf("%s: flow control reply: %v", tg.name, err)
	}
}

// fcSeqs is a consumer info sequence pair.
type fcSeqs struct {
	Consumer uint64 `json:"consumer_seq"`
	Stream   uint64 `json:"stream_seq"`
}

// fcState is the consumer's and its stream's counts, as lines.
func fcState(t *testing.T, tg *jsTarget, stream, name string) string {
	t.Helper()
	r := mustAPI(t, tg.nc, "$JS.API.CONSUMER.INFO."+stream+"."+name, "")
	var ci struct {
		Delivered      fcSeqs `json:"delivered"`
		AckFloor       fcSeqs `json:"ack_floor"`
		NumAckPending  int    `json:"num_ack_pending"`
		NumRedelivered int    `json:"num_redelivered"`
		NumPending     uint64 `json:"num_pending"`
	}
	if err := json.Unmarshal(r.raw, &ci); err != nil {
		t.Fatal(err)
	}
	var si struct {
		State struct {
			Msgs     uint64 `json:"messages"`
			FirstSeq uint64 `json:"first_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(mustAPI(t, tg.nc, "$JS.API.STREAM.INFO."+stream, "").raw, &si); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("delivered=%d/%d ack_floor=%d/%d ack_pending=%d redelivered=%d pending=%d stream msgs=%d first=%d",
		ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream, ci.NumAckPending,
		ci.NumRedelivered, ci.NumPending, si.State.Msgs, si.State.FirstSeq)
}

// waitFCState waits until fcState is want (acknowledgements and the
// retention they cause are applied after the answer is taken).
func waitFCState(t *testing.T, tg *jsTarget, stream, name, want string) string {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		got := fcState(t, tg, stream, name)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fcAckScenario(t *testing.T, tg *jsTarget) []string {
	js := tg.js
	var out []string
	for _, ret := range []jetstream.RetentionPolicy{jetstream.InterestPolicy, jetstream.WorkQueuePolicy, jetstream.LimitsPolicy} {
		name := "FC" + strconv.Itoa(int(ret))
		subj := "fc" + strconv.Itoa(int(ret))
		createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{subj + ".>"}, Retention: ret})
		deliver := "dlv." + name
		sub, err := tg.nc.SubscribeSync(deliver)
		if err != nil {
			t.Fatal(err)
		}
		r := mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE."+name+".C", fmt.Sprintf(
			`{"stream_name":%q,"config":{"durable_name":"C","deliver_subject":%q,"ack_policy":"flow_control","max_ack_pending":3}}`,
			name, deliver))
		var cr struct {
			Config struct {
				AckPolicy   string `json:"ack_policy"`
				FlowControl bool   `json:"flow_control"`
				Heartbeat   int64  `json:"idle_heartbeat"`
				AckWait     int64  `json:"ack_wait"`
				MaxDeliver  int    `json:"max_deliver"`
				MaxAckPend  int    `json:"max_ack_pending"`
			} `json:"config"`
		}
		if err := json.Unmarshal(r.raw, &cr); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s create %+v", name, cr.Config))
		// Published once the consumer is there: an interest stream keeps
		// nothing nobody is interested in.
		for i := 1; i <= 5; i++ {
			jsPublish(t, js, subj+".x", "m"+strconv.Itoa(i))
		}
		lines, req := fcDeliveries(t, tg, sub)
		out = append(out, lines...)
		// An ack on a delivery's reply acknowledges nothing, and as a
		// request (a double ack) finds nobody listening.
		if err := tg.nc.Publish(fmt.Sprintf("$JS.ACK.%s.C.1.1.1.0.4", name), []byte("+ACK")); err != nil {
			t.Fatal(err)
		}
		_, err = tg.nc.Request(fmt.Sprintf("$JS.ACK.%s.C.1.2.2.0.3", name), []byte("+ACK"), ioTimeout)
		out = append(out, fmt.Sprintf("%s double ack: %v", name, err))
		out = append(out, name+" at max: "+waitFCState(t, tg, name, "C",
			"delivered=3/3 ack_floor=0/0 ack_pending=3 redelivered=0 pending=2 stream msgs=5 first=1"))
		fcReply(t, tg, req, 2, 2)
		lines, req = fcDeliveries(t, tg, sub)
		out = append(out, lines...)
		want := "delivered=5/5 ack_floor=2/2 ack_pending=3 redelivered=0 pending=0 stream msgs=3 first=3"
		if ret == jetstream.LimitsPolicy {
			want = "delivered=5/5 ack_floor=2/2 ack_pending=3 redelivered=0 pending=0 stream msgs=5 first=1"
		}
		out = append(out, name+" after 2: "+waitFCState(t, tg, name, "C", want))
		fcReply(t, tg, req, 5, 5)
		want = "delivered=5/5 ack_floor=5/5 ack_pending=0 redelivered=0 pending=0 stream msgs=0 first=6"
		if ret == jetstream.LimitsPolicy {
			want = "delivered=5/5 ack_floor=5/5 ack_pending=0 redelivered=0 pending=0 stream msgs=5 first=1"
		}
		out = append(out, name+" after 5: "+waitFCState(t, tg, name, "C", want))
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestJSAckFlowControlCompare: flow_control consumers on interest,
// work-queue and limits streams, compared with nats-server: the request
// at max_ack_pending, acks through the answers' Nats-Last-Stream, plain
// acks ignored, the floors, counts and retention that follow.
func TestJSAckFlowControlCompare(t *testing.T) {
	ours, ref := jsPair(t)
	got, want := fcAckScenario(t, ours), fcAckScenario(t, ref)
	for _, l := range want {
		t.Log(l)
	}
	sameLines(t, "flow_control ack scenario", got, want)
}

// fcConsumer creates durable consumer name on stream, pushing to deliver
// with ack policy ack, through the API.
func fcConsumer(t *testing.T, tg *jsTarget, stream, name, deliver, ack string) {
	t.Helper()
	mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE."+stream+"."+name, fmt.Sprintf(
		`{"stream_name":%q,"config":{"durable_name":%q,"deliver_subject":%q,"ack_policy":%q,"max_ack_pending":1000,"flow_control":true,"idle_heartbeat":1000000000}}`,
		stream, name, deliver, ack))
}

// waitSourceErr waits for stream info's mirror or first source to report
// an error, and returns its err_code.
func waitSourceErr(t *testing.T, tg *jsTarget, stream string) int {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		var doc struct {
			Mirror *struct {
				Error *struct {
					Code int `json:"err_code"`
				} `json:"error"`
			} `json:"mirror"`
			Sources []struct {
				Error *struct {
					Code int `json:"err_code"`
				} `json:"error"`
			} `json:"sources"`
		}
		if err := json.Unmarshal(mustAPI(t, tg.nc, "$JS.API.STREAM.INFO."+stream, "").raw, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Mirror != nil && doc.Mirror.Error != nil {
			return doc.Mirror.Error.Code
		}
		if len(doc.Sources) > 0 && doc.Sources[0].Error != nil {
			return doc.Sources[0].Error.Code
		}
		if time.Now().After(deadline) {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func durableSourcingScenario(t *testing.T, tg *jsTarget) []string {
	js := tg.js
	var out []string
	// A mirror of a limits stream and a source of an interest stream,
	// each through a durable flow_control consumer made beforehand.
	createStream(t, js, jetstream.StreamConfig{Name: "DO", Subjects: []string{"do.>"}})
	createStream(t, js, jetstream.StreamConfig{Name: "DI", Subjects: []string{"di.>"}, Retention: jetstream.InterestPolicy})
	for i := 1; i <= 5; i++ {
		jsPublish(t, js, "do.x", "o"+strconv.Itoa(i))
	}
	fcConsumer(t, tg, "DO", "DC", "dsrc.dc", "flow_control")
	fcConsumer(t, tg, "DI", "SC", "dsrc.sc", "flow_control")
	for i := 1; i <= 5; i++ {
		jsPublish(t, js, "di.x", "i"+strconv.Itoa(i))
	}
	createStream(t, js, jetstream.StreamConfig{Name: "DM", Mirror: &jetstream.StreamSource{Name: "DO",
		Consumer: &jetstream.StreamConsumerSource{Name: "DC", DeliverSubject: "dsrc.dc"}}})
	createStream(t, js, jetstream.StreamConfig{Name: "DS", Subjects: []string{"ds.>"}, Sources: []*jetstream.StreamSource{{Name: "DI",
		Consumer: &jetstream.StreamConsumerSource{Name: "SC", DeliverSubject: "dsrc.sc"}}}})
	waitSourced(t, js, "DM", 5)
	waitSourced(t, js, "DS", 5)
	for i := 6; i <= 8; i++ {
		jsPublish(t, js, "do.x", "o"+strconv.Itoa(i))
		jsPublish(t, js, "di.x", "i"+strconv.Itoa(i))
	}
	for _, w := range []struct {
		name string
		n    uint64
	}{{"DM", 8}, {"DS", 8}} {
		info := waitSourced(t, js, w.name, w.n)
		out = append(out, fmt.Sprintf("%s state msgs=%d first=%d last=%d", w.name, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq))
		out = append(out, sourceInfoLines(info)...)
		out = append(out, storedLines(t, js, w.name, false, "Nats-Stream-Source")...)
	}
	// The flow control answers acknowledge what was stored: the limits
	// origin keeps it all, the interest origin drops it.
	out = append(out, "DC "+waitFCState(t, tg, "DO", "DC",
		"delivered=8/8 ack_floor=8/8 ack_pending=0 redelivered=0 pending=0 stream msgs=8 first=1"))
	out = append(out, "SC "+waitFCState(t, tg, "DI", "SC",
		"delivered=8/8 ack_floor=8/8 ack_pending=0 redelivered=0 pending=0 stream msgs=0 first=9"))

	// A durable consumer with another ack policy is refused, in stream info.
	fcConsumer(t, tg, "DO", "EX", "dsrc.ex", "explicit")
	createStream(t, js, jetstream.StreamConfig{Name: "DBAD", Mirror: &jetstream.StreamSource{Name: "DO",
		Consumer: &jetstream.StreamConsumerSource{Name: "EX", DeliverSubject: "dsrc.ex"}}})
	out = append(out, fmt.Sprintf("DBAD mirror error %d", waitSourceErr(t, tg, "DBAD")))
	createStream(t, js, jetstream.StreamConfig{Name: "DBADS", Sources: []*jetstream.StreamSource{{Name: "DO",
		Consumer: &jetstream.StreamConsumerSource{Name: "EX", DeliverSubject: "dsrc.ex"}}}})
	out = append(out, fmt.Sprintf("DBADS source error %d", waitSourceErr(t, tg, "DBADS")))
	return out
}

// TestJSDurableSourcingCompare: mirror.consumer and sources[].consumer
// read through the user's durable flow_control consumer, compared with
// nats-server: what is stored, stream info, the consumer's floors and the
// origin's interest retention, and the error for another ack policy.
func TestJSDurableSourcingCompare(t *testing.T) {
	ours, ref := jsPair(t)
	got, want := durableSourcingScenario(t, ours), durableSourcingScenario(t, ref)
	for _, l := range want {
		t.Log(l)
	}
	sameLines(t, "durable sourcing scenario", got, want)
}

// TestJSDurableSourcingResume: a mirror and a source reading through
// durable consumers, killed while behind and restarted cleanly, hold
// every origin message exactly once, and the consumers' ack floors reach
// the end.
func TestJSDurableSourcingResume(t *testing.T) {
	o := nodeOpts{}
	n, tg := jsNode(t, o)
	js := tg.js
	createStream(t, js, jetstream.StreamConfig{Name: "ORIGIN", Subjects: []string{"o"}})
	fcConsumer(t, tg, "ORIGIN", "MC", "dsrc.mc", "flow_control")
	fcConsumer(t, tg, "ORIGIN", "SC", "dsrc.sc", "flow_control")
	createStream(t, js, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{Name: "ORIGIN",
		Consumer: &jetstream.StreamConsumerSource{Name: "MC", DeliverSubject: "dsrc.mc"}}})
	createStream(t, js, jetstream.StreamConfig{Name: "S", Sources: []*jetstream.StreamSource{{Name: "ORIGIN",
		Consumer: &jetstream.StreamConsumerSource{Name: "SC", DeliverSubject: "dsrc.sc"}}}})
	tg = killWhileBehind(t, n, o, tg)
	for _, c := range []string{"MC", "SC"} {
		waitFor(t, ioTimeout, c+" acknowledged through 4010", func() bool {
			var ci struct {
				AckFloor      fcSeqs `json:"ack_floor"`
				NumAckPending int    `json:"num_ack_pending"`
			}
			r := mustAPI(t, tg.nc, "$JS.API.CONSUMER.INFO.ORIGIN."+c, "")
			return json.Unmarshal(r.raw, &ci) == nil && ci.AckFloor.Stream == 4010 && ci.NumAckPending == 0
		})
	}
}

// TestClusterDurableSourcing: an R3 mirror and an R3 source reading an R3
// origin through durable flow_control consumers, while the mirror's
// leader and then the origin's leader are killed, hold every origin
// message exactly once, and the consumers' ack floors reach the end.
func TestClusterDurableSourcing(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	nc, js := clusterJS(t, clusterURLs(nodes))
	tg := &jsTarget{name: "contrail cluster", nc: nc, js: js}
	createR3(t, js, jetstream.StreamConfig{Name: "ORIGIN", Subjects: []string{"o"}, Replicas: 3})
	fcConsumer(t, tg, "ORIGIN", "MC", "dsrc.mc", "flow_control")
	fcConsumer(t, tg, "ORIGIN", "SC", "dsrc.sc", "flow_control")
	createR3(t, js, jetstream.StreamConfig{Name: "M", Replicas: 3, Mirror: &jetstream.StreamSource{Name: "ORIGIN",
		Consumer: &jetstream.StreamConsumerSource{Name: "MC", DeliverSubject: "dsrc.mc"}}})
	createR3(t, js, jetstream.StreamConfig{Name: "S", Replicas: 3, Sources: []*jetstream.StreamSource{{Name: "ORIGIN",
		Consumer: &jetstream.StreamConsumerSource{Name: "SC", DeliverSubject: "dsrc.sc"}}}})
	publishWithRetry(t, nc, "o", 1, 300)
	leader, _ := streamLeader(t, js, nodes, "M")
	leader.kill(t)
	publishWithRetry(t, nc, "o", 301, 600)
	checkMirrorExact(t, js, "M", 600)
	checkSourceExact(t, js, "S", 600)
	leader.restart(t)
	ol, _ := streamLeader(t, js, nodes, "ORIGIN")
	ol.kill(t)
	publishWithRetry(t, nc, "o", 601, 650)
	checkMirrorExact(t, js, "M", 650)
	checkSourceExact(t, js, "S", 650)
	ol.restart(t)
	for _, c := range []string{"MC", "SC"} {
		waitFor(t, time.Minute, c+" acknowledged through 650", func() bool {
			resp, err := nc.Request("$JS.API.CONSUMER.INFO.ORIGIN."+c, nil, 2*time.Second)
			if err != nil {
				return false
			}
			var ci struct {
				AckFloor      fcSeqs `json:"ack_floor"`
				NumAckPending int    `json:"num_ack_pending"`
			}
			return json.Unmarshal(resp.Data, &ci) == nil && ci.AckFloor.Stream == 650 && ci.NumAckPending == 0
		})
	}
}
