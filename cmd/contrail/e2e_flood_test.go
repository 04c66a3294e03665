package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// One tenant floods a stream from a raw TCP connection as fast as the
// socket takes it. What the node queues for the apply path is bounded
// per stream and per node, so the node's memory stays flat, the flooder
// is slowed to what the disk absorbs, and another account's publishes
// are acknowledged promptly all along, none of them lost.

// floodVolume is how much the flooder sends: 1 GiB with CONTRAIL_SOAK=1;
// by default less, so the suite stays fast: 256 MiB (some 15 s), and
// 32 MiB under the race detector, which slows the node's apply path
// twentyfold. Either is far more than the node may buffer, and without
// the bound the neighbour's publishes waited behind all of it.
func floodVolume() int64 {
	switch {
	case os.Getenv("CONTRAIL_SOAK") != "":
		return 1 << 30
	case raceEnabled():
		return 32 << 20
	}
	return 256 << 20
}

// floodBounds are the node's RSS bound (0: not checked) and the
// neighbour's publish p99 bound. Under the race detector its shadow
// memory, not the node's, makes most of the RSS (675 MiB for a Go heap
// of 98 MiB, measured), and a group of the flood takes longer to apply.
func floodBounds() (rss int64, p99 time.Duration) {
	if raceEnabled() {
		return 0, 3 * time.Second
	}
	return 300 << 20, 2 * time.Second
}

func TestFloodBoundsMemoryAndNeighbours(t *testing.T) {
	volume := floodVolume()
	maxRSS, maxP99 := floodBounds()
	w := newOpWorld(t)
	dir := t.TempDir()
	n := startNode(t, nodeOpts{dir: dir, args: w.nodeArgs(dir)})
	flooder, fl := w.jsAccount(t, n, "FLOOD")
	_, other := w.jsAccount(t, n, "OTHER")
	createStream(t, fl.js, jetstream.StreamConfig{Name: "FLOOD", Subjects: []string{"flood.>"}, MaxMsgs: 1000})
	createStream(t, other.js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
	raw := connectRawCreds(t, n.NatsAddr, flooder, nil, "_nothing.here")

	base, ok := memOf(n.MonURL)
	if !ok || base == 0 {
		t.Skip("the node does not report its RSS on /varz")
	}
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // RSS sampler
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if r, ok := memOf(n.MonURL); ok && r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	// The neighbour publishes one message at a time, and reads each tenth
	// back, for as long as the flood lasts.
	type acked struct {
		seq  uint64
		data string
	}
	var (
		lat     []time.Duration
		acks    []acked
		failure error
		failed  int
	)
	go func() {
		defer wg.Done()
		st, err := other.js.Stream(context.Background(), "OTHER")
		if err != nil {
			failure = err
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := "other-" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			ack, err := other.js.Publish(ctx, "other."+strconv.Itoa(i%16), []byte(data))
			d := time.Since(start)
			if err == nil && i%10 == 0 {
				var m *jetstream.RawStreamMsg
				if m, err = st.GetMsg(ctx, ack.Sequence); err == nil && string(m.Data) != data {
					err = fmt.Errorf("seq %d holds %q, want %q", ack.Sequence, m.Data, data)
				}
			}
			cancel()
			lat = append(lat, d)
			if err != nil {
				// Keep going: the figures of a failing run tell how far off it is.
				failed++
				if failure == nil {
					failure = fmt.Errorf("neighbour publish %d: %w", i, err)
				}
				continue
			}
			acks = append(acks, acked{ack.Sequence, data})
		}
	}()

	// The flood: 1 KiB publishes, no reply subject, written in 1 MiB
	// chunks.
	payload := bytes.Repeat([]byte("x"), 1024)
	var chunk []byte
	for len(chunk) < 1<<20 {
		chunk = append(chunk, "PUB flood.x 1024\r\n"...)
		chunk = append(append(chunk, payload...), "\r\n"...)
	}
	start := time.Now()
	var sent int64
	for sent < volume {
		raw.conn.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := raw.conn.Write(chunk); err != nil {
			t.Fatalf("flood write after %d MiB: %v", sent>>20, err)
		}
		sent += int64(len(chunk))
	}
	// The flooder's PONG comes after every publish it sent was taken.
	raw.send("PING\r\n")
	raw.expect("PONG")
	// And a publish to the stream on another connection is acknowledged
	// once everything queued before it was applied.
	// (Generous: without a bound, the backlog took minutes to apply.)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	end, err := fl.js.Publish(ctx, "flood.end", []byte("end"))
	if err != nil {
		t.Fatalf("publishing after the flood: %v", err)
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	msgs := float64(sent) / float64(len(chunk)) * float64(bytes.Count(chunk, []byte("PUB ")))
	slices.Sort(lat)
	p50, p99 := pct(lat, 50), pct(lat, 99)
	t.Logf("flood: %d MiB in %v (%.0f MiB/s, %.0f msgs/s, %d stored); RSS %d MiB before, %d MiB peak; neighbour: %d publishes, p50 %v, p99 %v, max %v",
		sent>>20, elapsed.Round(time.Millisecond), float64(sent)/(1<<20)/elapsed.Seconds(), msgs/elapsed.Seconds(), end.Sequence-1,
		base>>20, peak.Load()>>20, len(lat), p50, p99, pct(lat, 100))
	if failure != nil {
		t.Fatalf("%d of the neighbour's publishes failed; the first: %v", failed, failure)
	}
	if p := peak.Load(); maxRSS > 0 && p > maxRSS {
		t.Errorf("RSS peaked at %d MiB, want at most %d MiB", p>>20, maxRSS>>20)
	}
	if len(lat) == 0 {
		t.Fatal("the neighbour published nothing during the flood")
	}
	if p99 > maxP99 {
		t.Errorf("the neighbour's publish p99 is %v, want at most %v", p99, maxP99)
	}

	// The capped stream holds its cap; every acknowledged neighbour
	// message is there, in order.
	if st := streamInfo(t, fl.js, "FLOOD").State; st.Msgs != 1000 || st.LastSeq != end.Sequence {
		t.Errorf("FLOOD holds %d messages up to seq %d, want 1000 up to %d", st.Msgs, st.LastSeq, end.Sequence)
	}
	st := streamInfo(t, other.js, "OTHER").State
	if st.Msgs != uint64(len(acks)) {
		t.Errorf("OTHER holds %d messages, %d were acknowledged", st.Msgs, len(acks))
	}
	c, err := other.js.OrderedConsumer(ctxT(t), "OTHER", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range acks {
		m, err := c.Next(jetstream.FetchMaxWait(ioTimeout))
		if err != nil {
			t.Fatalf("reading acknowledged message %d (seq %d): %v", i, want.seq, err)
		}
		md, _ := m.Metadata()
		if md.Sequence.Stream != want.seq || string(m.Data()) != want.data {
			t.Fatalf("message %d is seq %d %q, want seq %d %q", i, md.Sequence.Stream, m.Data(), want.seq, want.data)
		}
	}
}

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// TestIngestBoundsConfig: the per-stream bounds take nats-server's names
// in the jetstream block, and the same file starts nats-server; the node
// bounds are Contrail's own.
func TestIngestBoundsConfig(t *testing.T) {
	t.Parallel()
	const bounds = "max_buffered_msgs: 5000, max_buffered_size: 8MB"
	dir := t.TempDir()
	ref := writeFile(t, dir, "ref.conf", `jetstream { store_dir: "`+dir+`/ref", `+bounds+` }`)
	startNatsServer(t, "-c", ref)
	_, js := jsNode(t, nodeOpts{config: `jetstream { ` + bounds + `, node_max_buffered_msgs: 20000, node_max_buffered_size: "64M" }`})
	createStream(t, js.js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}})
	jsPublish(t, js.js, "s", "x")
	for _, bad := range []struct{ key, value string }{
		{"max_buffered_msgs", "-1"}, {"max_buffered_size", `"lots"`}, {"node_max_buffered_size", "-5"},
	} {
		dir := t.TempDir()
		conf := writeFile(t, dir, "bad.conf", "jetstream { "+bad.key+": "+bad.value+" }")
		code, _, stderr := runContrail(t, "dataplane", "--data-dir", dir, "--nats-addr", freeAddr(t),
			"--monitor-addr", freeAddr(t), "--config", conf)
		if code == 0 || !strings.Contains(stderr, bad.key) {
			t.Errorf("%s: %s: exit %d, stderr %q; want a refusal naming the key", bad.key, bad.value, code, stderr)
		}
	}
}
