package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer delivery timing and lifetime, side by side with nats-server:
// backoff and ack-wait redelivery (to waiting pull requests and to push
// subscribers), pull requests that outlive a reconnect, a stream delete
// ending its consumers, and ordered consumers recovering from loss. Times
// are compared with a tolerance; every wait is for an event, with a
// deadline.

// timingSlack is how far apart Contrail's and nats-server's delivery
// times may be: both run timers, on a shared, loaded machine, and a
// race-built node (as CI runs it, beside the package's other tests) is
// several times slower.
func timingSlack() time.Duration {
	if raceEnabled() {
		return 300 * time.Millisecond
	}
	return 150 * time.Millisecond
}

// arrival is one message seen by a test: when (since the scenario's
// start), and what.
type arrival struct {
	at   time.Duration
	data string
	dc   uint64 // delivery count from the ack subject; 0 for a status
	code string // status code, for status messages
}

func (a arrival) String() string {
	if a.code != "" {
		return fmt.Sprintf("%v status %s", a.at.Round(time.Millisecond), a.code)
	}
	return fmt.Sprintf("%v %q #%d", a.at.Round(time.Millisecond), a.data, a.dc)
}

// arrivals records what reaches a subscription, with times.
type arrivals struct {
	start time.Time
	mu    sync.Mutex
	got   []arrival
	ch    chan struct{}
}

func newArrivals() *arrivals { return &arrivals{start: time.Now(), ch: make(chan struct{}, 1)} }

func (a *arrivals) add(m *nats.Msg) {
	ar := arrival{at: time.Since(a.start), data: string(m.Data)}
	if st := m.Header.Get("Status"); st != "" && len(m.Data) == 0 {
		ar.code = st
	} else if md, err := m.Metadata(); err == nil {
		ar.dc = md.NumDelivered
	}
	a.mu.Lock()
	a.got = append(a.got, ar)
	a.mu.Unlock()
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

// listen subscribes a to a new inbox on nc until the test ends and
// returns the inbox.
func (a *arrivals) listen(t testing.TB, nc *nats.Conn) string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.Subscribe(inbox, a.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return inbox
}

func (a *arrivals) snapshot() []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival(nil), a.got...)
}

// msgs is what arrived that was not a status message.
func (a *arrivals) msgs() []arrival {
	var out []arrival
	for _, ar := range a.snapshot() {
		if ar.code == "" {
			out = append(out, ar)
		}
	}
	return out
}

// wait waits until cond holds over what arrived, or fails at timeout.
func (a *arrivals) wait(t testing.TB, timeout time.Duration, what string, cond func([]arrival) bool) []arrival {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if got := a.snapshot(); cond(got) {
			return got
		}
		select {
		case <-a.ch:
		case <-deadline.C:
			t.Fatalf("%s: not within %v; got %v", what, timeout, a.snapshot())
		}
	}
}

// nMsgs is a wait condition: at least n messages (not statuses).
func nMsgs(n int) func([]arrival) bool {
	return func(got []arrival) bool {
		c := 0
		for _, a := range got {
			if a.code == "" {
				c++
			}
		}
		return c >= n
	}
}

// sameTimes compares two delivery transcripts: the same messages with the
// same delivery counts, arriving within timingSlack of each other.
func sameTimes(t testing.TB, what string, ours, ref []arrival) {
	t.Helper()
	t.Logf("%s:\ncontrail:    %v\nnats-server: %v", what, ours, ref)
	if len(ours) != len(ref) {
		t.Fatalf("%s: contrail got %d deliveries %v, nats-server %d %v", what, len(ours), ours, len(ref), ref)
	}
	for i := range ours {
		o, r := ours[i], ref[i]
		d := o.at - r.at
		if o.data != r.data || o.dc != r.dc || o.code != r.code || d > timingSlack() || d < -timingSlack() {
			t.Fatalf("%s: delivery %d differs: contrail %v, nats-server %v\ncontrail: %v\nnats-server: %v", what, i, o, r, ours, ref)
		}
	}
}

// sameGaps is sameTimes for a cluster: it compares the gap before each
// delivery, and allows a gap to run late by clusterLateSlack. Three
// race-built nodes replicating every consumer update, beside the
// package's other cluster tests on two cores, sometimes wake a timer
// half a second late; comparing gaps keeps one late wake-up from
// shifting every later delivery. A gap that comes early (a wrong backoff
// step, a redelivery before ack_wait) is still held to timingSlack.
func sameGaps(t testing.TB, what string, ours, ref []arrival) {
	t.Helper()
	t.Logf("%s:\ncontrail:    %v\nnats-server: %v", what, ours, ref)
	if len(ours) != len(ref) {
		t.Fatalf("%s: contrail got %d deliveries %v, nats-server %d %v", what, len(ours), ours, len(ref), ref)
	}
	late := timingSlack()
	if raceEnabled() {
		late = clusterLateSlack
	}
	for i := range ours {
		o, r := ours[i], ref[i]
		d := o.at - r.at
		if i > 0 {
			d = (o.at - ours[i-1].at) - (r.at - ref[i-1].at)
		}
		if o.data != r.data || o.dc != r.dc || o.code != r.code || d > late || d < -timingSlack() {
			t.Fatalf("%s: delivery %d differs: contrail %v, nats-server %v (gap off by %v)\ncontrail: %v\nnats-server: %v", what, i, o, r, d, ours, ref)
		}
	}
}

// clusterLateSlack is how late a race-built cluster may deliver, after
// the previous delivery, against nats-server.
const clusterLateSlack = time.Second

// both runs scenario against nats-server, then against a fresh Contrail
// node, and returns what each saw. One after the other: a scenario may
// fail the test, which only the test's goroutine may do.
func both[T any](t *testing.T, scenario func(t testing.TB, tg *jsTarget) T) (ours, ref T) {
	t.Helper()
	o, r := jsPair(t)
	ref = scenario(t, r)
	ours = scenario(t, o)
	return ours, ref
}

// sinceFirst rebases arrival times on the first one.
func sinceFirst(got []arrival) []arrival {
	if len(got) == 0 {
		return got
	}
	base := got[0].at
	out := make([]arrival, len(got))
	for i, a := range got {
		a.at -= base
		out[i] = a
	}
	return out
}

// TestJSCCompareBackoffRedelivery: a pull consumer with backoff 50 ms,
// 250 ms, 250 ms redelivers an unacknowledged message to the request that
// is already waiting, at those steps, until max_deliver.
func TestJSCCompareBackoffRedelivery(t *testing.T) {
	t.Parallel()
	ours, ref := both(t, backoffScenario(1))
	sameTimes(t, "backoff redelivery", ours, ref)
}

// memStream is the config of a memory stream name on subjects prefix.>
// with replicas.
func memStream(name, prefix string, replicas int) string {
	return fmt.Sprintf(`{"name":%q,"subjects":[%q],"storage":"memory","num_replicas":%d}`, name, prefix+".>", replicas)
}

func backoffScenario(replicas int) func(t testing.TB, tg *jsTarget) []arrival {
	return func(t testing.TB, tg *jsTarget) []arrival {
		mustAPI(t, tg.nc, "$JS.API.STREAM.CREATE.BO", memStream("BO", "bo", replicas))
		defer mustAPI(t, tg.nc, "$JS.API.STREAM.DELETE.BO", "")
		mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE.BO.C", `{"stream_name":"BO","config":{"durable_name":"C","ack_policy":"explicit",`+
			`"backoff":[50000000,250000000,250000000],"max_deliver":4}}`)
		jsPublish(t, tg.js, "bo.a", "x")
		arr := newArrivals()
		inbox := arr.listen(t, tg.nc)
		if err := tg.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.BO.C", inbox, []byte(`{"batch":10,"expires":3000000000}`)); err != nil {
			t.Fatal(err)
		}
		got := arr.wait(t, 3*time.Second, tg.name+": four deliveries", nMsgs(4))
		return sinceFirst(got)
	}
}

// TestJSCCompareAckWaitRedelivery: ack_wait redelivers to a pull request
// already waiting, and a push consumer redelivers every ack_wait until
// max_deliver, then stops.
func TestJSCCompareAckWaitRedelivery(t *testing.T) {
	t.Parallel()
	t.Run("Pull", func(t *testing.T) {
		t.Parallel()
		ours, ref := both(t, ackWaitScenario(false, 1))
		sameTimes(t, "ack wait redelivery to a waiting pull", ours, ref)
	})
	t.Run("Push", func(t *testing.T) {
		t.Parallel()
		ours, ref := both(t, ackWaitScenario(true, 1))
		sameTimes(t, "ack wait redelivery to push", ours, ref)
	})
}

func ackWaitScenario(push bool, replicas int) func(t testing.TB, tg *jsTarget) []arrival {
	const ackWait = 300 * time.Millisecond
	return func(t testing.TB, tg *jsTarget) []arrival {
		mustAPI(t, tg.nc, "$JS.API.STREAM.CREATE.AW", memStream("AW", "aw", replicas))
		defer mustAPI(t, tg.nc, "$JS.API.STREAM.DELETE.AW", "")
		arr := newArrivals()
		inbox := arr.listen(t, tg.nc)
		deliver := ""
		if push {
			deliver = `"deliver_subject":"` + inbox + `",`
		}
		mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE.AW.C", `{"stream_name":"AW","config":{"durable_name":"C","ack_policy":"explicit",`+
			deliver+`"ack_wait":`+strconv.FormatInt(int64(ackWait), 10)+`,"max_deliver":4}}`)
		jsPublish(t, tg.js, "aw.a", "x")
		if !push {
			if err := tg.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.AW.C", inbox, []byte(`{"batch":10,"expires":4000000000}`)); err != nil {
				t.Fatal(err)
			}
		}
		arr.wait(t, 4*time.Second, tg.name+": four deliveries", nMsgs(4))
		// max_deliver is reached: nothing more comes for two ack waits
		// (a fifth delivery would have come after one).
		final := time.NewTimer(2 * ackWait)
		<-final.C
		return sinceFirst(arr.msgs())
	}
}

// cuttableDialer dials normally and can sever the last connection it
// made, as a network fault would; until release, redials wait, so the
// client stays away while the test acts.
type cuttableDialer struct {
	mu   sync.Mutex
	last net.Conn
	hold chan struct{}
}

func (d *cuttableDialer) Dial(network, addr string) (net.Conn, error) {
	d.mu.Lock()
	hold := d.hold
	d.mu.Unlock()
	if hold != nil {
		<-hold
	}
	c, err := net.DialTimeout(network, addr, ioTimeout)
	if err == nil {
		d.mu.Lock()
		d.last = c
		d.mu.Unlock()
	}
	return c, err
}

func (d *cuttableDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold = make(chan struct{})
	if d.last != nil {
		d.last.Close()
	}
}

func (d *cuttableDialer) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.hold)
	d.hold = nil
}

// TestJSCComparePullAcrossReconnect: a waiting pull request survives its
// client's reconnect, though the stream takes messages the consumer does
// not want meanwhile; a message published after the client is back
// reaches the same reply subject.
func TestJSCComparePullAcrossReconnect(t *testing.T) {
	t.Parallel()
	scenario := func(t testing.TB, tg *jsTarget) []arrival {
		d := &cuttableDialer{}
		reconnected, disconnected := make(chan struct{}, 1), make(chan struct{}, 1)
		allowReconnect := func(o *nats.Options) error { o.AllowReconnect = true; return nil }
		nc := connect(t, tg.url, allowReconnect, nats.SetCustomDialer(d), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }),
			nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
		mustAPI(t, nc, "$JS.API.STREAM.CREATE.RC", `{"name":"RC","subjects":["rc.>"],"storage":"memory"}`)
		mustAPI(t, nc, "$JS.API.CONSUMER.CREATE.RC.C", `{"stream_name":"RC","config":{"durable_name":"C","ack_policy":"explicit","filter_subject":"rc.a"}}`)
		arr := newArrivals()
		inbox := arr.listen(t, nc)
		if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.RC.C", inbox, []byte(`{"batch":1,"expires":10000000000}`)); err != nil {
			t.Fatal(err)
		}
		waitConsumer(t, tg.js, "RC", "C", ioTimeout, "the request waiting", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 1 })
		d.cut()
		recvChan(t, disconnected, tg.name+": disconnect")
		jsPublish(t, tg.js, "rc.other", "unwanted")
		d.release()
		recvChan(t, reconnected, tg.name+": reconnect")
		flush(t, nc)
		jsPublish(t, tg.js, "rc.a", "after")
		got := arr.wait(t, ioTimeout, tg.name+": the message on the old request", nMsgs(1))
		for i := range got {
			got[i].at = 0
		}
		return got
	}
	ours, ref := both(t, scenario)
	sameTimes(t, "pull request across a reconnect", ours, ref)
}

// TestJSCCompareStreamDeleteEndsConsumers: deleting a stream deletes its
// push consumer at once: its heartbeats stop.
func TestJSCCompareStreamDeleteEndsConsumers(t *testing.T) {
	t.Parallel()
	ours, ref := both(t, streamDeleteScenario(1))
	sameTimes(t, "after the stream delete", ours, ref)
}

func streamDeleteScenario(replicas int) func(t testing.TB, tg *jsTarget) []arrival {
	const hb = 100 * time.Millisecond
	return func(t testing.TB, tg *jsTarget) []arrival {
		mustAPI(t, tg.nc, "$JS.API.STREAM.CREATE.SD", memStream("SD", "sd", replicas))
		arr := newArrivals()
		inbox := arr.listen(t, tg.nc)
		mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE.SD.C", `{"stream_name":"SD","config":{"durable_name":"C","ack_policy":"explicit",`+
			`"deliver_subject":"`+inbox+`","idle_heartbeat":`+strconv.FormatInt(int64(hb), 10)+`}}`)
		jsPublish(t, tg.js, "sd.a", "x")
		arr.wait(t, ioTimeout, tg.name+": a message and a heartbeat", func(got []arrival) bool {
			return nMsgs(1)(got) && got[len(got)-1].code == "100"
		})
		mustAPI(t, tg.nc, "$JS.API.STREAM.DELETE.SD", "")
		flush(t, tg.nc)
		before := len(arr.snapshot())
		// Five heartbeat intervals: a consumer still alive would send
		// several.
		quiet := time.NewTimer(5 * hb)
		<-quiet.C
		after := arr.snapshot()[before:]
		if r := apiRequest(t, tg.nc, "$JS.API.CONSUMER.INFO.SD.C", ""); r.errCode() == 0 {
			t.Errorf("%s: consumer info after stream delete: %s", tg.name, r)
		}
		for i := range after {
			after[i].at = 0
		}
		return after
	}
}

// TestJSCCompareOrderedRecovery: an ordered consumer whose client keeps
// dropping messages (a tiny pending limit and a slow handler) and whose
// server-side consumer is deleted under it recovers every time and sees
// the whole stream, in order, once.
func TestJSCCompareOrderedRecovery(t *testing.T) {
	t.Parallel()
	const n = 150
	scenario := func(t testing.TB, tg *jsTarget) []arrival {
		mkStream(t, tg.js, jetstream.StreamConfig{Name: "OR", Subjects: []string{"or.>"}, Storage: jetstream.MemoryStorage})
		pubN(t, tg.js, "or.a", "m", n)
		created := subscribeSync(t, tg.nc, "$JS.EVENT.ADVISORY.CONSUMER.CREATED.OR.*")
		flush(t, tg.nc)
		ljs := legacy(t, tg.nc)
		var mu sync.Mutex
		var seen []string
		done := make(chan struct{})
		var sub *nats.Subscription
		var err error
		sub, err = ljs.Subscribe("or.>", func(m *nats.Msg) {
			mu.Lock()
			seen = append(seen, string(m.Data))
			k := len(seen)
			mu.Unlock()
			if k%50 == 1 {
				// Slow now and then: the pending limit drops what
				// arrives meanwhile.
				time.Sleep(30 * time.Millisecond)
			}
			if k == n {
				close(done)
			}
		}, nats.OrderedConsumer(), nats.IdleHeartbeat(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := sub.SetPendingLimits(8, -1); err != nil {
			t.Fatal(err)
		}
		// Delete the server-side consumer twice while it runs: the client
		// notices the missing heartbeats and recreates it.
		for i := 0; i < 2; i++ {
			waitFor(t, ioTimeout, "a consumer to delete", func() bool {
				st, err := tg.js.Stream(ctxT(t), "OR")
				if err != nil {
					t.Fatal(err)
				}
				names := st.ConsumerNames(ctxT(t))
				for name := range names.Name() {
					_ = tg.js.DeleteConsumer(context.Background(), "OR", name)
					return true
				}
				return false
			})
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			mu.Lock()
			t.Fatalf("%s: ordered consumer saw %d of %d messages", tg.name, len(seen), n)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, s := range seen {
			if s != "m"+strconv.Itoa(i+1) {
				t.Fatalf("%s: message %d is %q", tg.name, i, s)
			}
		}
		// The first consumer and one per recovery from a delete.
		for i := 0; i < 3; i++ {
			nextMsg(t, created)
		}
		n := 3
		for {
			if _, err := created.NextMsg(0); err != nil {
				break
			}
			n++
		}
		t.Logf("%s: %d consumers created", tg.name, n)
		return nil
	}
	both(t, scenario)
}

// cmpStep is one step of a compared session that may do more than one
// request: it returns a comparable reply document.
type cmpStep struct {
	name string
	do   func(t testing.TB, nc *nats.Conn) apiReply
	mask []string
}

// compareSteps runs steps against both servers in order and reports
// every reply that differs.
func compareSteps(t *testing.T, ours, ref *nats.Conn, steps []cmpStep) {
	t.Helper()
	for _, st := range steps {
		a, b := st.do(t, ours), st.do(t, ref)
		t.Logf("%s: %s", st.name, b.raw)
		sameReply(t, st.name, a, b, st.mask...)
	}
}

// apiCmp is a step of one request, compared as exchange reduces it.
func apiCmp(name, subj, body string, mask ...string) cmpStep {
	return cmpStep{name: name, mask: mask, do: func(t testing.TB, nc *nats.Conn) apiReply {
		return exchange(t, nc, apiStep{name: name, subj: subj, body: body})
	}}
}

// pullCmp pulls n messages one request at a time from stream's consumer,
// acknowledging each (a double ack) when ack is set; the reply lists
// each message's payload and ack subject shape.
func pullCmp(name, stream, cons string, n int, ack bool) cmpStep {
	return cmpStep{name: name, do: func(t testing.TB, nc *nats.Conn) apiReply {
		var got []any
		for i := 0; i < n; i++ {
			m, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT."+stream+"."+cons, []byte(`{"batch":1,"expires":1000000000}`), 2*time.Second)
			if err != nil {
				t.Fatalf("%s: pull: %v", name, err)
			}
			if st := m.Header.Get("Status"); st != "" {
				got = append(got, "status "+st)
				continue
			}
			got = append(got, string(m.Data)+" "+ackShape(m.Reply))
			if ack {
				if _, err := nc.Request(m.Reply, nil, 2*time.Second); err != nil {
					t.Fatalf("%s: ack: %v", name, err)
				}
			}
		}
		doc := map[string]any{"msgs": got}
		return apiReply{raw: []byte(canonJSON(doc)), doc: doc}
	}}
}

// TestJSCCompareConsumerReset: CONSUMER.RESET without a sequence (back to
// just above the ack floor) and with one, for each deliver policy, and
// its refusals.
func TestJSCCompareConsumerReset(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	info := []string{"created", "ts"}
	steps := []cmpStep{
		apiCmp("stream", "$JS.API.STREAM.CREATE.R", `{"name":"R","subjects":["r.>"],"storage":"memory"}`),
		apiCmp("pub 1", "r.a", "1"), apiCmp("pub 2", "r.b", "2"), apiCmp("pub 3", "r.a", "3"),
		apiCmp("pub 4", "r.b", "4"), apiCmp("pub 5", "r.a", "5"),
		apiCmp("consumer", "$JS.API.CONSUMER.CREATE.R.D", `{"stream_name":"R","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":60000000000}}`),
		pullCmp("pull and ack two", "R", "D", 2, true),
		pullCmp("pull one, no ack", "R", "D", 1, false),
		apiCmp("info before reset", "$JS.API.CONSUMER.INFO.R.D", ""),
		apiCmp("reset to the ack floor", "$JS.API.CONSUMER.RESET.R.D", "", info...),
		apiCmp("info after reset", "$JS.API.CONSUMER.INFO.R.D", ""),
		pullCmp("pull after reset", "R", "D", 1, true),
		apiCmp("reset to 5", "$JS.API.CONSUMER.RESET.R.D", `{"seq":5}`, info...),
		pullCmp("pull after reset to 5", "R", "D", 1, true),
		apiCmp("reset to 1", "$JS.API.CONSUMER.RESET.R.D", `{"seq":1}`, info...),
		pullCmp("pull after reset to 1", "R", "D", 2, false),
		apiCmp("reset past the end", "$JS.API.CONSUMER.RESET.R.D", `{"seq":100}`, info...),
		apiCmp("reset, seq 0", "$JS.API.CONSUMER.RESET.R.D", `{"seq":0}`, info...),
		apiCmp("reset bad json", "$JS.API.CONSUMER.RESET.R.D", `{"seq":`),
		apiCmp("reset missing consumer", "$JS.API.CONSUMER.RESET.R.NOPE", ""),
		apiCmp("reset missing stream", "$JS.API.CONSUMER.RESET.NOPE.D", ""),
		apiCmp("by start seq", "$JS.API.CONSUMER.CREATE.R.S", `{"stream_name":"R","config":{"durable_name":"S","deliver_policy":"by_start_sequence","opt_start_seq":3,"ack_policy":"explicit"}}`),
		apiCmp("reset below start seq", "$JS.API.CONSUMER.RESET.R.S", `{"seq":2}`),
		apiCmp("reset at start seq", "$JS.API.CONSUMER.RESET.R.S", `{"seq":4}`, info...),
		apiCmp("deliver last", "$JS.API.CONSUMER.CREATE.R.L", `{"stream_name":"R","config":{"durable_name":"L","deliver_policy":"last","ack_policy":"explicit"}}`),
		apiCmp("reset deliver last with seq", "$JS.API.CONSUMER.RESET.R.L", `{"seq":2}`),
		apiCmp("reset deliver last to floor", "$JS.API.CONSUMER.RESET.R.L", "", info...),
		apiCmp("by start time", "$JS.API.CONSUMER.CREATE.R.T", `{"stream_name":"R","config":{"durable_name":"T","deliver_policy":"by_start_time","opt_start_time":"2000-01-01T00:00:00Z","ack_policy":"explicit"}}`),
		apiCmp("reset by start time", "$JS.API.CONSUMER.RESET.R.T", `{"seq":2}`, info...),
		apiCmp("filtered", "$JS.API.CONSUMER.CREATE.R.F", `{"stream_name":"R","config":{"durable_name":"F","filter_subject":"r.a","ack_policy":"none"}}`),
		pullCmp("pull filtered", "R", "F", 2, false),
		apiCmp("reset filtered to 2", "$JS.API.CONSUMER.RESET.R.F", `{"seq":2}`, info...),
		pullCmp("pull filtered after reset", "R", "F", 1, false),
	}
	compareSteps(t, ours.nc, ref.nc, steps)
}

// TestJSCComparePauseRunsOut: a consumer paused for 300 ms announces its
// pause, then, when the deadline passes, that it is no longer paused, and
// a pull request waiting meanwhile gets its message then.
func TestJSCComparePauseRunsOut(t *testing.T) {
	t.Parallel()
	const pause = 300 * time.Millisecond
	type result struct {
		advisories []any
		times      []arrival
	}
	scenario := func(t testing.TB, tg *jsTarget) result {
		mustAPI(t, tg.nc, "$JS.API.STREAM.CREATE.PA", `{"name":"PA","subjects":["pa.>"],"storage":"memory"}`)
		mustAPI(t, tg.nc, "$JS.API.CONSUMER.CREATE.PA.C", `{"stream_name":"PA","config":{"durable_name":"C","ack_policy":"explicit"}}`)
		advs := subscribeSync(t, tg.nc, "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.PA.C")
		flush(t, tg.nc)
		arr := newArrivals()
		inbox := arr.listen(t, tg.nc)
		until := time.Now().Add(pause).UTC().Format(time.RFC3339Nano)
		mustAPI(t, tg.nc, "$JS.API.CONSUMER.PAUSE.PA.C", `{"pause_until":"`+until+`"}`)
		jsPublish(t, tg.js, "pa.a", "x")
		if err := tg.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.PA.C", inbox, []byte(`{"batch":1,"expires":5000000000}`)); err != nil {
			t.Fatal(err)
		}
		var res result
		for i := 0; i < 2; i++ {
			m := nextMsg(t, advs)
			var doc map[string]any
			if err := json.Unmarshal(m.Data, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["pause_until"] != nil {
				// Both carry the deadline set: the same instant.
				if pu, _ := time.Parse(time.RFC3339Nano, doc["pause_until"].(string)); pu.Format(time.RFC3339Nano) != until {
					t.Errorf("%s: advisory %d: pause_until %v, want %s", tg.name, i, doc["pause_until"], until)
				}
			}
			res.advisories = append(res.advisories, maskReply(doc, "id", "timestamp", "pause_until"))
			res.times = append(res.times, arrival{at: time.Since(arr.start), data: fmt.Sprint(doc["paused"])})
		}
		got := arr.wait(t, ioTimeout, tg.name+": the message after the pause", nMsgs(1))
		res.times = append(res.times, got...)
		return res
	}
	ours, ref := both(t, scenario)
	if d := jsonDiff("", ours.advisories, ref.advisories); len(d) > 0 {
		t.Errorf("pause advisories differ:\n  %s\ncontrail:    %v\nnats-server: %v", strings.Join(d, "\n  "), ours.advisories, ref.advisories)
	}
	sameTimes(t, "pause advisories and delivery", ours.times, ref.times)
}

// directCmp is a DIRECT.GET step whose reply may be many messages: it
// lists each (headers, time stamps masked, and payload) until a status
// message ends the run.
func directCmp(name, stream, body string) cmpStep {
	return cmpStep{name: name, do: func(t testing.TB, nc *nats.Conn) apiReply {
		inbox := nats.NewInbox()
		sub := subscribeSync(t, nc, inbox)
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, []byte(body)); err != nil {
			t.Fatal(err)
		}
		var got []any
		for {
			m, err := sub.NextMsg(2 * time.Second)
			if err != nil {
				got = append(got, "quiet")
				break
			}
			hdr := map[string]any{}
			for k, v := range m.Header {
				if k == "Nats-Time-Stamp" {
					v = []string{"TIME"}
				}
				hdr[k] = strings.Join(v, ",")
			}
			got = append(got, map[string]any{"hdr": hdr, "data": string(m.Data)})
			if m.Header.Get("Status") != "" {
				break
			}
		}
		doc := map[string]any{"msgs": got}
		return apiReply{raw: []byte(canonJSON(doc)), doc: doc}
	}}
}

// TestJSCCompareDirectGetBatch: DIRECT.GET's batch, multi_last and
// up_to_* forms, their headers (Nats-Num-Pending, Nats-Last-Sequence,
// Nats-UpTo-Sequence), the EOB and the statuses that end them.
func TestJSCCompareDirectGetBatch(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	hdrPub := cmpStep{name: "pub with a header", do: func(t testing.TB, nc *nats.Conn) apiReply {
		m := nats.NewMsg("d.c")
		m.Header.Set("X-Kind", "four")
		m.Data = []byte("4")
		r, err := nc.RequestMsg(m, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return apiReply{raw: r.Data, doc: map[string]any{"ack": string(r.Data)}}
	}}
	many := cmpStep{name: "1025 subjects", do: func(t testing.TB, nc *nats.Conn) apiReply {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		futs := make([]jetstream.PubAckFuture, 0, 1025)
		for i := 0; i < 1025; i++ {
			f, err := js.PublishAsync("e."+strconv.Itoa(i), []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
			if len(futs) == 400 {
				waitPubAcks(t, futs)
				futs = futs[:0]
			}
		}
		waitPubAcks(t, futs)
		return apiReply{raw: []byte("{}"), doc: map[string]any{}}
	}}
	steps := []cmpStep{
		apiCmp("stream", "$JS.API.STREAM.CREATE.D", `{"name":"D","subjects":["d.>"],"storage":"memory","allow_direct":true}`),
		apiCmp("pub 1", "d.a", "1"), apiCmp("pub 2", "d.b", "2"), apiCmp("pub 3", "d.a", "3"),
		hdrPub, apiCmp("pub 5", "d.b", "5"), apiCmp("pub 6", "d.a", "6"),
		directCmp("batch of 3 from 1", "D", `{"seq":1,"batch":3}`),
		directCmp("batch past the end", "D", `{"seq":2,"batch":10}`),
		directCmp("batch of 1", "D", `{"seq":2,"batch":1}`),
		directCmp("batch next_by_subj", "D", `{"seq":1,"next_by_subj":"d.a","batch":5}`),
		directCmp("batch next_by_subj wildcard", "D", `{"next_by_subj":"d.*","batch":2}`),
		directCmp("batch max_bytes", "D", `{"seq":1,"batch":5,"max_bytes":5}`),
		directCmp("batch start_time", "D", `{"start_time":"2000-01-01T00:00:00Z","batch":2}`),
		directCmp("batch from past the end", "D", `{"seq":100,"batch":3}`),
		directCmp("batch no_hdr", "D", `{"seq":3,"batch":2,"no_hdr":true}`),
		directCmp("batch negative", "D", `{"seq":3,"batch":-1}`),
		directCmp("batch with last_by_subj", "D", `{"last_by_subj":"d.a","batch":2}`),
		directCmp("batch invalid next_by_subj", "D", `{"next_by_subj":"d..a","batch":2}`),
		directCmp("multi_last two subjects", "D", `{"multi_last":["d.a","d.b"]}`),
		directCmp("multi_last wildcard", "D", `{"multi_last":["d.>"]}`),
		directCmp("multi_last overlapping", "D", `{"multi_last":["d.>","d.a"]}`),
		directCmp("multi_last up_to_seq", "D", `{"multi_last":["d.>"],"up_to_seq":3}`),
		directCmp("multi_last up_to_seq 1", "D", `{"multi_last":["d.*"],"up_to_seq":1}`),
		directCmp("multi_last batch", "D", `{"multi_last":["d.>"],"batch":2}`),
		directCmp("multi_last from seq", "D", `{"multi_last":["d.>"],"seq":5}`),
		directCmp("multi_last max_bytes", "D", `{"multi_last":["d.>"],"max_bytes":1}`),
		directCmp("multi_last no_hdr", "D", `{"multi_last":["d.a"],"no_hdr":true}`),
		directCmp("multi_last nothing matches", "D", `{"multi_last":["x.>"]}`),
		directCmp("multi_last up_to_time early", "D", `{"multi_last":["d.>"],"up_to_time":"2000-01-01T00:00:00Z"}`),
		directCmp("multi_last up_to_time late", "D", `{"multi_last":["d.>"],"up_to_time":"2099-01-01T00:00:00Z"}`),
		directCmp("multi_last both up_to", "D", `{"multi_last":["d.>"],"up_to_seq":3,"up_to_time":"2099-01-01T00:00:00Z"}`),
		directCmp("multi_last with next_by_subj", "D", `{"multi_last":["d.>"],"next_by_subj":"d.a"}`),
		directCmp("multi_last with last_by_subj", "D", `{"multi_last":["d.>"],"last_by_subj":"d.a"}`),
		apiCmp("wide stream", "$JS.API.STREAM.CREATE.E", `{"name":"E","subjects":["e.>"],"storage":"memory","allow_direct":true}`),
		many,
		directCmp("multi_last too many", "E", `{"multi_last":["e.>"]}`),
		directCmp("multi_last within bound", "E", `{"multi_last":["e.1","e.2","e.3","e.1000"],"batch":3}`),
	}
	compareSteps(t, ours.nc, ref.nc, steps)
}

// TestClusterConsumerDelivery: on a three-node cluster, consumers of R3
// streams redeliver at their backoff steps and every ack wait (their
// state replicated through the partition log), end with their stream,
// and reset, as nats-server's single server does with R1 streams.
func TestClusterConsumerDelivery(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, clusterOpts{})
	nc, js := clusterJS(t, clusterURLs(nodes))
	waitSpread(t, js, nodes)
	ours := &jsTarget{name: "contrail R3", url: clusterURLs(nodes), nc: nc, js: js}
	ref := jsConnect(t, "nats-server", startRefJS(t).URL)
	for _, sc := range []struct {
		name string
		run  func(replicas int) func(t testing.TB, tg *jsTarget) []arrival
	}{
		{"backoff", backoffScenario},
		{"pull ack wait", func(r int) func(testing.TB, *jsTarget) []arrival { return ackWaitScenario(false, r) }},
		{"push ack wait", func(r int) func(testing.TB, *jsTarget) []arrival { return ackWaitScenario(true, r) }},
		{"stream delete", streamDeleteScenario},
	} {
		sameGaps(t, sc.name+" on R3", sc.run(3)(t, ours), sc.run(1)(t, ref))
	}
	// A reset is replicated: it holds on the partition's next leader.
	mustAPI(t, nc, "$JS.API.STREAM.CREATE.RS", memStream("RS", "rs", 3))
	for i := 1; i <= 5; i++ {
		jsPublish(t, js, "rs.a", strconv.Itoa(i))
	}
	mustAPI(t, nc, "$JS.API.CONSUMER.CREATE.RS.C", `{"stream_name":"RS","config":{"durable_name":"C","ack_policy":"explicit"}}`)
	r := mustAPI(t, nc, "$JS.API.CONSUMER.RESET.RS.C", `{"seq":4}`)
	if !strings.Contains(r.String(), `"reset_seq":4`) {
		t.Fatalf("reset: %s", r)
	}
	_, before := streamLeader(t, js, nodes, "RS")
	// A pull request waiting when the leadership moves is told so, as
	// nats-server's new consumer leader tells it: the client pulls again.
	mustAPI(t, nc, "$JS.API.CONSUMER.CREATE.RS.W", `{"stream_name":"RS","config":{"durable_name":"W","ack_policy":"explicit","filter_subject":"rs.none"}}`)
	waiting := subscribeSync(t, nc, nats.NewInbox())
	if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.RS.W", waiting.Subject, []byte(`{"batch":1,"expires":60000000000}`)); err != nil {
		t.Fatal(err)
	}
	waitConsumer(t, js, "RS", "W", clusterTimeout(), "the request waiting", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 1 })
	mustAPI(t, nc, "$JS.API.STREAM.LEADER.STEPDOWN.RS", "")
	if m := nextMsg(t, waiting); status(m) != "409 Leadership Change" {
		t.Fatalf("waiting request after the stepdown heard %q", status(m))
	}
	waitFor(t, clusterTimeout(), "a new leader for RS", func() bool {
		_, info := streamLeader(t, js, nodes, "RS")
		return info.Cluster.Leader != before.Cluster.Leader
	})
	ci := waitConsumer(t, js, "RS", "C", clusterTimeout(), "the consumer on the new leader", func(*jetstream.ConsumerInfo) bool { return true })
	if ci.Delivered.Stream != 3 || ci.AckFloor.Stream != 3 || ci.NumPending != 2 {
		t.Fatalf("after the stepdown: delivered %+v, ack floor %+v, pending %d; want the reset to 4 kept", ci.Delivered, ci.AckFloor, ci.NumPending)
	}
}

// TestJSCCompareConsumerResetCLI: `nats consumer reset`, with and without
// --sequence, moves the consumer on both servers alike.
func TestJSCCompareConsumerResetCLI(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	for _, tg := range []*jsTarget{ours, ref} {
		mkStream(t, tg.js, jetstream.StreamConfig{Name: "RC", Subjects: []string{"rc.>"}, Storage: jetstream.MemoryStorage})
		pubN(t, tg.js, "rc.a", "m", 5)
		mkConsumer(t, tg.js, "RC", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
	}
	for _, args := range [][]string{
		{"consumer", "reset", "RC", "C", "--sequence", "4", "-f"},
		{"consumer", "reset", "RC", "C", "-f"},
	} {
		var infos [2]*jetstream.ConsumerInfo
		for i, tg := range []*jsTarget{ours, ref} {
			out, err := tryCLI(t, tg.url, args...)
			if err != nil {
				t.Fatalf("%s: nats %v: %v\n%s", tg.name, args, err, out)
			}
			infos[i] = consumerInfo(t, tg.js, "RC", "C")
		}
		o, r := infos[0], infos[1]
		if o.Delivered != r.Delivered || o.AckFloor != r.AckFloor || o.NumPending != r.NumPending {
			t.Errorf("nats %v: contrail delivered %+v ack floor %+v pending %d; nats-server %+v %+v %d",
				args, o.Delivered, o.AckFloor, o.NumPending, r.Delivered, r.AckFloor, r.NumPending)
		}
	}
}

// waitSpread waits until the cluster's partitions are led by distinct
// nodes: the balancer then has nothing to move (a move right after start
// would end a consumer's waiting pull requests mid-measurement). The
// partitions are found through R3 streams placed on them.
func waitSpread(t *testing.T, js jetstream.JetStream, nodes []*clusterNode) {
	t.Helper()
	groups := map[string]string{} // raft group: a stream on it
	for i := 1; len(groups) < len(nodes) && i <= 2*len(nodes); i++ {
		name := fmt.Sprintf("SPREAD%d", i)
		createR3(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}, Replicas: 3,
			Storage: jetstream.MemoryStorage})
		_, info := streamLeader(t, js, nodes, name)
		groups[info.Cluster.RaftGroup] = name
	}
	waitFor(t, clusterTimeout(), "partition leaders on distinct nodes", func() bool {
		leaders := map[string]bool{}
		for _, name := range groups {
			_, info := streamLeader(t, js, nodes, name)
			leaders[info.Cluster.Leader] = true
		}
		return len(leaders) == len(groups)
	})
}
