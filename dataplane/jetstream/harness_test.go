package jetstream

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// fakeAccount is an in-process Account: internal subscriptions and
// publishes, without a server, so the engine can be driven directly.
type fakeAccount struct {
	name string
	mu   sync.Mutex
	subs map[int]fakeSub
	next int
	// onSubscribe, if set, sees each filter subscribed, before the
	// subscription is made (outside mu).
	onSubscribe atomic.Pointer[func(filter string)]
}

type fakeSub struct {
	filter string
	h      func(subject, reply, hdr, msg []byte)
}

func newFakeAccount(name string) *fakeAccount {
	return &fakeAccount{name: name, subs: map[int]fakeSub{}}
}

func (a *fakeAccount) Name() string { return a.name }

func (a *fakeAccount) SubscribeInternal(filter string, h func(subject, reply, hdr, msg []byte)) (func(), error) {
	if f := a.onSubscribe.Load(); f != nil {
		(*f)(filter)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	id := a.next
	a.subs[id] = fakeSub{filter, h}
	return func() {
		a.mu.Lock()
		delete(a.subs, id)
		a.mu.Unlock()
	}, nil
}

// SubscribeInternalPaced subscribes a paced handler; the fake's
// publishers never wait, as the server's own do not.
func (a *fakeAccount) SubscribeInternalPaced(filter string, h func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{}) (func(), error) {
	return a.SubscribeInternal(filter, func(subject, reply, hdr, msg []byte) { h(subject, reply, hdr, msg, false) })
}

func (a *fakeAccount) HasSubscriber(subj string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.subs {
		if s.filter == subj {
			return true
		}
	}
	return false
}

func (a *fakeAccount) HasInterest(subj string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.subs {
		if subject.Matches(s.filter, subj) {
			return true
		}
	}
	return false
}

func (a *fakeAccount) WatchInterest(string, func()) func() { return func() {} }

// Route delivers through the account every time: the fake has no match
// to remember.
func (a *fakeAccount) Route(to string) Route { return fakeRoute{a, to} }

type fakeRoute struct {
	a  *fakeAccount
	to string
}

func (r fakeRoute) Deliver(subj, reply string, hdr, msg []byte) {
	r.a.Deliver(r.to, subj, reply, hdr, msg)
}
func (r fakeRoute) HasInterest() bool { return r.a.HasInterest(r.to) }

func (a *fakeAccount) Publish(subj, reply string, hdr, msg []byte) {
	a.Deliver(subj, subj, reply, hdr, msg)
}

func (a *fakeAccount) Deliver(to, subj, reply string, hdr, msg []byte) {
	a.mu.Lock()
	var hs []func(subject, reply, hdr, msg []byte)
	for _, s := range a.subs {
		if subject.Matches(s.filter, to) {
			hs = append(hs, s.h)
		}
	}
	a.mu.Unlock()
	for _, h := range hs {
		h([]byte(subj), []byte(reply), hdr, msg)
	}
}

// request publishes and waits for the reply on a private inbox.
func (a *fakeAccount) request(t testing.TB, subj string, hdr, body []byte) []byte {
	t.Helper()
	b, ok := a.tryRequest(subj, hdr, body, 10*time.Second)
	if !ok {
		t.Fatalf("%s: no reply", subj)
	}
	return b
}

// tryRequest is request with a timeout, reporting whether a reply came.
func (a *fakeAccount) tryRequest(subj string, hdr, body []byte, timeout time.Duration) ([]byte, bool) {
	ch := make(chan []byte, 1)
	inbox := "_INBOX.test." + subj
	unsub, _ := a.SubscribeInternal(inbox, func(_, _, _, msg []byte) {
		select {
		case ch <- append([]byte(nil), msg...):
		default:
		}
	})
	defer unsub()
	a.Publish(subj, inbox, hdr, body)
	select {
	case b := <-ch:
		return b, true
	case <-time.After(timeout):
		return nil, false
	}
}

// apiCall sends a JSON API request and decodes the reply into out.
func (a *fakeAccount) apiCall(t testing.TB, subj string, req, out any) {
	t.Helper()
	var body []byte
	if req != nil {
		body, _ = json.Marshal(req)
	}
	if err := json.Unmarshal(a.request(t, subj, nil, body), out); err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openEngine starts an engine whose file store is a Pebble DB on fs; opts
// are as for engineOn.
func openEngine(t testing.TB, fs vfs.FS, opts ...func(*Options)) (*Engine, *fakeAccount, func()) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return engineOn(t, st, opts...)
}

// unpacedIngest lifts the ingest bounds for tests that queue a long run
// of publishes at once: the fake account's publishers are never paced,
// so past the bounds their publishes would be refused.
func unpacedIngest(o *Options) {
	o.MaxBufferedMsgs, o.NodeMaxBufferedMsgs = 1<<30, 1<<30
	o.MaxBufferedSize, o.NodeMaxBufferedSize = 1<<40, 1<<40
}

// engineOn starts an engine on st; opts adjust its Options (a clock, a
// sync interval) before it starts.
func engineOn(t testing.TB, st *store.Store, opts ...func(*Options)) (*Engine, *fakeAccount, func()) {
	t.Helper()
	mem := store.NewMem()
	o := Options{Store: st, Memory: mem, ServerVersion: "test", Log: quietLog()}
	for _, f := range opts {
		f(&o)
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	acc := newFakeAccount("A")
	if err := e.EnableAccount(acc); err != nil {
		t.Fatal(err)
	}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		e.Close()
		st.Close()
		mem.Close()
	}
	t.Cleanup(closeAll)
	return e, acc, closeAll
}

func createStream(t testing.TB, acc *fakeAccount, cfg api.StreamConfig) {
	t.Helper()
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE."+cfg.Name, cfg, &resp)
	if resp.Error != nil {
		t.Fatalf("create %s: %v", cfg.Name, resp.Error)
	}
}

// publish sends a message to a stream subject and decodes the ack.
func publish(t testing.TB, acc *fakeAccount, subj string, hdr, data []byte) api.PubAckResponse {
	t.Helper()
	var ack api.PubAckResponse
	if err := json.Unmarshal(acc.request(t, subj, hdr, data), &ack); err != nil {
		t.Fatal(err)
	}
	return ack
}
