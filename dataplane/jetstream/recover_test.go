package jetstream

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// BenchmarkRecover measures a restart's recovery of an account's streams,
// each with one message: what stands between a restart and a healthy node.
func BenchmarkRecover(b *testing.B) {
	for _, n := range []int{1_000, 20_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			fs := vfs.NewMem()
			e, _, closeAll := openEngine(b, fs)
			a := accountOf(b, e, "A")
			createMany(b, a, 0, n)
			for i := range n {
				s := a.lookup(manyStreamsName(i))
				p := &proposal{s: s, acct: a, kind: propMsg, subject: fmt.Sprintf("s.%d", i), data: []byte("one message")}
				if r := s.ap.apply(p); r.err != nil {
					b.Fatal(r.err)
				}
			}
			closeAll()
			for b.Loop() {
				st, err := store.Open(store.Options{Dir: "js", FS: fs})
				if err != nil {
					b.Fatal(err)
				}
				mem := store.NewMem()
				e, err := New(Options{Store: st, Memory: mem, Log: quietLog()})
				if err != nil {
					b.Fatal(err)
				}
				e.Close()
				st.Close()
				mem.Close()
			}
		})
	}
}

// TestRecoverManyStreams restarts an engine holding streams of every kind
// start-up reads records for, interleaved in id order as the recovery
// workers take them: each comes back with its state, durable consumer,
// duplicate window, last message id and TTL timer, and none is mixed up
// with its neighbour's.
func TestRecoverManyStreams(t *testing.T) {
	const n = 300
	fs := vfs.NewMem()
	e, acc, closeAll := openEngine(t, fs)
	a := accountOf(t, e, "A")
	for i := range n {
		cfg := manyStreamsConfig(i)
		cfg.AllowMsgTTL = i%3 == 0
		if err := createDirect(a, cfg); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			createConsumer(t, acc, cfg.Name, api.ConsumerConfig{Durable: fmt.Sprintf("C%d", i), AckPolicy: api.AckExplicit})
		}
		for m := range i%3 + 1 {
			hdr := []byte(fmt.Sprintf("NATS/1.0\r\nNats-Msg-Id: id-%d-%d\r\n", i, m))
			if cfg.AllowMsgTTL {
				hdr = append(hdr, "Nats-TTL: 1h\r\n"...)
			}
			if ack := publish(t, acc, fmt.Sprintf("s.%d", i), append(hdr, "\r\n"...), []byte("x")); ack.Error != nil {
				t.Fatalf("publish to %d: %v", i, ack.Error)
			}
		}
	}
	closeAll()

	e2, acc2, _ := openEngine(t, fs)
	a2 := accountOf(t, e2, "A")
	for i := range n {
		s := a2.lookup(manyStreamsName(i))
		if s == nil {
			t.Fatalf("stream %d not recovered", i)
		}
		s.mu.Lock()
		msgs, lastID, nextTTL, cons := s.mu.state.Msgs, s.mu.lastMsgID, s.mu.nextTTL, len(s.mu.cons)
		_, dedup := s.mu.dedup[fmt.Sprintf("id-%d-0", i)]
		s.mu.Unlock()
		wantCons := 0
		if i%2 == 0 {
			wantCons = 1
		}
		switch {
		case msgs != uint64(i%3+1):
			t.Fatalf("stream %d: %d messages, want %d", i, msgs, i%3+1)
		case lastID != fmt.Sprintf("id-%d-%d", i, i%3):
			t.Fatalf("stream %d: last message id %q", i, lastID)
		case !dedup:
			t.Fatalf("stream %d: duplicate window lost id-%d-0", i, i)
		case (nextTTL != 0) != (i%3 == 0):
			t.Fatalf("stream %d: next TTL %d", i, nextTTL)
		case cons != wantCons:
			t.Fatalf("stream %d: %d consumers, want %d", i, cons, wantCons)
		}
	}
	// The window works as a window: the first id is a duplicate.
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: id-7-0\r\n\r\n")
	if ack := publish(t, acc2, "s.7", hdr, []byte("x")); ack.Error != nil || !ack.Duplicate {
		t.Fatalf("republished id after restart: %+v", ack)
	}
}
