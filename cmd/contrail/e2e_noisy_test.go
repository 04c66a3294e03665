package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Noisy neighbour: one tenant flooding its JetStream API and running
// expensive requests must not starve another tenant's API on the same
// node. Sizes are CI-sized; the figures are printed, the assertions are
// on counts and errors (and a generous latency bound).
const (
	noisyBigMsgs     = 10_000 // messages (one subject each) in A's stream
	noisyFloodConns  = 4      // A's connections firing requests without waiting
	noisyFloodPer    = 4_000  // requests each of them keeps outstanding
	noisyHeavyLoops  = 8      // A's loops of STREAM.INFO with every subject
	noisyVictimReqs  = 200    // B's requests, at least, one at a time
	noisyVictimBound = 2 * time.Second
)

func TestNoisyNeighbourAPI(t *testing.T) {
	w := newOpWorld(t)
	n := w.startOpNode(t)
	noisy := w.account("NOISY", func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() })
	credsA, _ := noisy.user("noisy", nil)
	a := jsConnect(t, "NOISY", n.URL, nats.UserCredentials(credsA))
	_, b := w.jsAccount(t, n, "VICTIM")

	createStream(t, a.js, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}})
	fillDistinctSubjects(t, a.js, "big.", noisyBigMsgs)
	createStream(t, b.js, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}})

	// B alone, for the figures.
	alone := victimLoop(t, b.nc, noisyVictimReqs/4)

	stop := make(chan struct{})
	var heavy sync.WaitGroup
	heavyConn := connectCreds(t, n.URL, credsA)
	var heavyDone atomic.Int64
	for range noisyHeavyLoops {
		heavy.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := heavyConn.Request("$JS.API.STREAM.INFO.BIG", []byte(`{"subjects_filter":">"}`), ioTimeout); err == nil {
					heavyDone.Add(1)
				}
			}
		})
	}
	floods := make([]*apiFlood, noisyFloodConns)
	for i := range floods {
		floods[i] = startAPIFlood(t, n.URL, credsA, "$JS.API.INFO", noisyFloodPer)
	}

	during := victimLoop(t, b.nc, noisyVictimReqs)
	close(stop)
	heavy.Wait()

	var sent, ok, overloaded int64
	for _, f := range floods {
		f.stopped.Store(true)
	}
	for _, f := range floods {
		waitFor(t, 30*time.Second, "every flood request answered", f.answered)
		sent += f.sent.Load()
		ok += f.ok.Load()
		overloaded += f.overloaded.Load()
	}
	t.Logf("B alone:        %s", alone)
	t.Logf("B during flood: %s", during)
	t.Logf("A: %d flood requests answered (%d infos, %d overloaded 10023), %d heavy infos",
		sent, ok, overloaded, heavyDone.Load())

	for _, r := range []*victimResult{alone, during} {
		if len(r.failures) > 0 {
			t.Errorf("B's requests failed (%d of %d), first: %s", len(r.failures), r.n(), r.failures[0])
		}
		if m := r.max(); m > noisyVictimBound {
			t.Errorf("B waited %v for a reply (bound %v)", m, noisyVictimBound)
		}
	}
	if overloaded == 0 {
		t.Errorf("A's flood of %d requests never filled its queue; the test floods too little", sent)
	}
}

// fillDistinctSubjects publishes n messages to prefix+i, one subject
// each, in windows of acknowledged batches (a client that outruns the
// acks stalls and fails).
func fillDistinctSubjects(t testing.TB, js jetstream.JetStream, prefix string, n int) {
	t.Helper()
	const window = 1000
	for i := range n {
		if _, err := js.PublishAsync(prefix+strconv.Itoa(i), []byte("x")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if (i+1)%window != 0 && i+1 != n {
			continue
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(ioTimeout):
			t.Fatalf("%d publishes still pending", js.PublishAsyncPending())
		}
	}
}

// apiFlood is one connection keeping many requests outstanding: it
// fires a batch at once, more than its account may queue, and until
// stopped a new request for every one answered, so its account's queue
// stays full. (A refused request is not repeated: a client that retries
// refusals at once turns the test into one of CPU share between
// connections, which is not the API scheduler's to give.)
type apiFlood struct {
	sent, ok, overloaded atomic.Int64
	stopped              atomic.Bool
}

// answered reports whether every request sent got its reply.
func (f *apiFlood) answered() bool { return f.ok.Load()+f.overloaded.Load() == f.sent.Load() }

// startAPIFlood connects with creds and floods subject with requests,
// outstanding at first, until stopped.
func startAPIFlood(t testing.TB, url, creds, subject string, outstanding int) *apiFlood {
	t.Helper()
	nc := connectCreds(t, url, creds)
	f := &apiFlood{}
	inbox := nats.NewInbox()
	fire := func() {
		f.sent.Add(1)
		if err := nc.PublishRequest(subject, inbox, nil); err != nil {
			f.sent.Add(-1)
		}
	}
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		var r struct {
			Error *struct {
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &r) == nil && r.Error != nil && r.Error.ErrCode == 10023 {
			f.overloaded.Add(1)
			return
		}
		f.ok.Add(1)
		if !f.stopped.Load() {
			fire()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	flush(t, nc)
	for range outstanding {
		fire()
	}
	flush(t, nc)
	return f
}

// victimResult is what the quiet tenant saw: each request's latency and
// every failure (no reply, an error reply).
type victimResult struct {
	lat      []time.Duration
	failures []string
}

func (r *victimResult) n() int { return len(r.lat) }

func (r *victimResult) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (r *victimResult) max() time.Duration { return r.pct(1) }

func (r *victimResult) String() string {
	return fmt.Sprintf("%d requests, p50 %v, p99 %v, max %v, %d failed",
		r.n(), r.pct(0.50), r.pct(0.99), r.max(), len(r.failures))
}

// victimLoop sends B's requests one at a time: STREAM.INFO of its empty
// stream, account INFO, and now and then a consumer create (a change,
// which runs alone in B's lane).
func victimLoop(t testing.TB, nc *nats.Conn, n int) *victimResult {
	t.Helper()
	r := &victimResult{}
	for i := range n {
		subj, body := "$JS.API.STREAM.INFO.SMALL", ""
		switch i % 10 {
		case 3:
			subj = "$JS.API.INFO"
		case 7:
			subj = "$JS.API.CONSUMER.CREATE.SMALL.C" + strconv.Itoa(i)
			body = fmt.Sprintf(`{"stream_name":"SMALL","config":{"name":"C%d","ack_policy":"explicit","inactive_threshold":1000000000}}`, i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		start := time.Now()
		m, err := nc.RequestWithContext(ctx, subj, []byte(body))
		cancel()
		r.lat = append(r.lat, time.Since(start))
		if err != nil {
			r.failures = append(r.failures, fmt.Sprintf("%s: %v", subj, err))
			continue
		}
		var reply struct {
			Error *struct {
				Code        int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Error != nil {
			r.failures = append(r.failures, fmt.Sprintf("%s: %s", subj, m.Data))
		}
	}
	return r
}

// TestAPIPipelinedOrder sends, from one connection and without waiting
// for replies, create / info / delete / info for many streams: a change
// is served after the requests before it from the same account and
// before those after it, so the first info finds the stream and the
// second does not. nats-server v2.15.2 does not promise this (its API
// workers race: a pipelined info or delete can miss the create before
// it), so the test runs on Contrail only.
func TestAPIPipelinedOrder(t *testing.T) {
	_, tg := jsNode(t, nodeOpts{})
	nc := tg.nc
	const streams = 50
	steps := []string{"create", "info", "delete", "gone"}
	replies := make(chan *nats.Msg, streams*len(steps))
	inbox := nats.NewInbox()
	sub, err := nc.ChanSubscribe(inbox+".>", replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	flush(t, nc)
	for i := range streams {
		name := "P" + strconv.Itoa(i)
		for _, step := range steps {
			subj, body := "$JS.API.STREAM.INFO."+name, ""
			switch step {
			case "create":
				subj, body = "$JS.API.STREAM.CREATE."+name, fmt.Sprintf(`{"name":%q,"subjects":["p.%d"]}`, name, i)
			case "delete":
				subj = "$JS.API.STREAM.DELETE." + name
			}
			if err := nc.PublishRequest(subj, inbox+"."+step+"."+name, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush(t, nc)
	for range streams * len(steps) {
		m := recvChan(t, replies, "a pipelined reply")
		step, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, inbox+"."), ".")
		r := apiReply{raw: m.Data}
		if err := json.Unmarshal(m.Data, &r.doc); err != nil {
			t.Fatalf("%s: %q", m.Subject, m.Data)
		}
		if step == "gone" {
			if r.errCode() != 10059 {
				t.Errorf("%s, after the delete: %s; want stream not found (10059)", m.Subject, r)
			}
		} else if r.errCode() != 0 {
			t.Errorf("%s: %s", m.Subject, r)
		}
	}
}
