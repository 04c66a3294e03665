package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// consumerOf finds a consumer of account acc's stream.
func consumerOf(t *testing.T, e *Engine, acc, stream, name string) *consumer {
	t.Helper()
	e.mu.Lock()
	a := e.mu.accounts[acc]
	e.mu.Unlock()
	s := a.lookup(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mu.cons[name]
	if c == nil {
		t.Fatalf("no consumer %s on %s", name, stream)
	}
	return c
}

// aheadBytesLocked is what the consumer's read-ahead buffer holds.
func (c *consumer) aheadBytesLocked() int {
	n := 0
	for _, m := range c.mu.ahead {
		n += len(m.Header) + len(m.Data)
	}
	return n
}

// TestDeliveryPassIsBounded: a pull request for a backlog of large
// messages is served in passes of at most passMsgs messages or passBytes
// bytes, so the consumer never holds the backlog in memory, and its lock
// is free between passes: a publish that needs it (an eviction of a
// message the consumer has pending) completes while the delivery is in
// progress. Order and the request's accounting survive the passes.
func TestDeliveryPassIsBounded(t *testing.T) {
	const (
		total = 160
		size  = 64 << 10
	)
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: total})
	body := bytes.Repeat([]byte("x"), size)
	for i := range total {
		publish(t, acc, fmt.Sprintf("s.%d", i%7), nil, body)
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, MaxAckPending: -1})
	c := consumerOf(t, e, "A", "S", "C")

	type seen struct{ seq, dseq uint64 }
	var got []seen
	maxHeld, maxTaken := 0, 0
	published := false
	done := make(chan struct{})
	unsub, _ := acc.SubscribeInternal("_INBOX.big", func(_, reply, _, msg []byte) {
		if len(msg) != size {
			return // a status
		}
		meta := strings.Split(string(reply), ".")
		var sseq, cseq uint64
		fmt.Sscan(meta[5], &sseq)
		fmt.Sscan(meta[6], &cseq)
		got = append(got, seen{sseq, cseq})
		// Runs on the delivery goroutine, between the sends of a pass:
		// what it holds now is the rest of the pass and the read-ahead.
		c.mu.Lock()
		taken := int(c.mu.dseq - cseq) // taken after this one, not sent yet
		held := (taken+1)*size + c.aheadBytesLocked()
		c.mu.Unlock()
		maxTaken, maxHeld = max(maxTaken, taken+1), max(maxHeld, held)
		if !published {
			published = true
			// One more message evicts seq 1, pending on C: the apply path
			// takes C's lock. It must not wait for the delivery to end.
			ack := publish(t, acc, "s.new", nil, []byte("small"))
			if ack.Error != nil || ack.PubAck == nil || ack.Sequence != total+1 {
				t.Errorf("publish during delivery: %+v", ack)
			}
		}
		if len(got) == total {
			close(done)
		}
	})
	defer unsub()
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.big", nil,
		fmt.Appendf(nil, `{"batch":%d,"expires":%d}`, total, 10*time.Second))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("delivered %d of %d", len(got), total)
	}
	for i, d := range got {
		if d.seq != uint64(i+1) || d.dseq != uint64(i+1) {
			t.Fatalf("delivery %d: stream seq %d consumer seq %d", i, d.seq, d.dseq)
		}
	}
	if maxTaken > passMsgs || maxTaken*size > passBytes+size {
		t.Errorf("a pass took %d messages (%d bytes) at once; bound %d messages, %d bytes", maxTaken, maxTaken*size, passMsgs, passBytes)
	}
	if limit := passBytes + aheadBytes + 2*size; maxHeld > limit {
		t.Errorf("consumer held %d bytes during delivery; bound %d", maxHeld, limit)
	}
	t.Logf("largest pass %d messages; most held %d KiB", maxTaken, maxHeld>>10)
}

// TestPassesKeepPullAccounting: a request's batch and max_bytes, and
// max_ack_pending, count across passes as they would in one.
func TestPassesKeepPullAccounting(t *testing.T) {
	const size = 64 << 10
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	body := bytes.Repeat([]byte("y"), size)
	for range 120 {
		publish(t, acc, "s.a", nil, body)
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, MaxAckPending: 90})
	got := inbox(t, acc, "_INBOX.acct")
	pull := func(req string) (msgs int, status string) {
		t.Helper()
		acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.acct", nil, []byte(req))
		for {
			d := next(t, got)
			if len(d.data) != size {
				return msgs, d.hdr
			}
			msgs++
		}
	}
	// Batch 50 of a larger backlog: 50 messages, in order, over several
	// passes (done by count without max_bytes: no status).
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.acct", nil, []byte(`{"batch":50}`))
	for i := range 50 {
		if d := next(t, got); len(d.data) != size || !strings.Contains(d.reply, fmt.Sprintf(".%d.%d.", i+1, i+1)) {
			t.Fatalf("batch delivery %d: %q", i, d.reply)
		}
	}
	// max_bytes of 25 messages and a bit: 25 messages, then 409 as the 26th
	// does not fit.
	n, status := pull(fmt.Sprintf(`{"batch":100,"max_bytes":%d,"expires":5000000000}`, 25*(size+100)+50))
	if n != 25 || !strings.Contains(status, "409 Message Size Exceeds MaxBytes") {
		t.Fatalf("max_bytes request: %d messages, then %q", n, status)
	}
	// max_ack_pending 90: 75 are pending, so 15 more go out, then the
	// request waits at the limit until it expires (408).
	n, status = pull(`{"batch":100,"expires":300000000}`)
	if n != 15 || !strings.Contains(status, "408") {
		t.Fatalf("at max_ack_pending: %d messages, then %q", n, status)
	}
	var info api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
	if info.NumAckPending != 90 || info.Delivered.Stream != 90 || info.NumPending != 30 {
		b, _ := json.Marshal(info.ConsumerInfo)
		t.Fatalf("state after passes: %s", b)
	}
}

// TestNoWaitOverALongMiss: a no_wait pull on a consumer whose filters
// match nothing for a long run (many small messages; fewer large ones,
// more bytes than a pass reads) gets the match after the run, over
// several passes, not 404 because one pass stopped reading.
func TestNoWaitOverALongMiss(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		size int
	}{
		{"small", 20000, 10},
		{"large", 100, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The run is queued at once, without waiting for acks.
			e, acc, _ := openEngine(t, vfs.NewMem(), unpacedIngest)
			createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
			body := bytes.Repeat([]byte("z"), tc.size)
			for range tc.n {
				acc.Publish("s.a", "", nil, body) // no reply: queued without waiting
			}
			publish(t, acc, "s.b", nil, []byte("match"))
			e.mu.Lock()
			s := e.mu.accounts["A"].lookup("S")
			e.mu.Unlock()
			if got := s.durable.Load(); got != uint64(tc.n+1) {
				t.Fatalf("stored %d of %d", got, tc.n+1)
			}
			createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit,
				FilterSubjects: []string{"s.b", "s.c"}})
			got := inbox(t, acc, "_INBOX.miss")
			acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.miss", nil, []byte(`{"batch":1,"no_wait":true}`))
			if d := next(t, got); d.data != "match" {
				t.Fatalf("no_wait pull: %+v", d)
			}
		})
	}
}
