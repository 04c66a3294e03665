package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The ingest part of the noisy-neighbour scenario: tenant A floods
// several capped streams over as many connections (core publishes, no
// acknowledgements, as fast as the server reads them) while tenant B
// publishes asynchronously to a stream of its own. What B's publishes get
// alone and during the flood tells whether one tenant's writes hold up
// another's acknowledgements.
const (
	ingestFloodStreams = 12
	ingestFloodMsgSize = 1024
	ingestFloodMaxMsgs = 1000 // each of A's streams evicts as it stores
	ingestWindow       = 256  // B's publishes in flight
	ingestMsgSize      = 128
	ingestAlone        = 3 * time.Second
	ingestWarmup       = time.Second
	ingestFlooded      = 5 * time.Second
	// An acknowledgement later than this counts as failed, so a server
	// that stops answering ends the part instead of holding it up.
	ingestAckTimeout = 10 * time.Second
)

// ingestResult is B's publishing in one phase.
type ingestResult struct {
	acked   int
	refused int
	took    time.Duration
	lat     latencies
}

func (r ingestResult) rate() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.acked) / r.took.Seconds()
}

func (r ingestResult) describe() string {
	return fmt.Sprintf("%s msgs/s acknowledged, p50 %s, p99 %s; %d refused or failed",
		commas(int64(r.rate())), fmtLatency(r.lat.pct(0.5)), fmtLatency(r.lat.pct(0.99)), r.refused)
}

// noisyIngest is what one server did in the ingest part.
type noisyIngest struct {
	sideOutcome
	alone, flooded ingestResult
	aStored        float64 // A's messages stored per second of the flood
}

// asyncPublish publishes to subject through js for d, with up to
// ingestWindow publishes in flight.
func asyncPublish(js jetstream.JetStream, subject string, d time.Duration) ingestResult {
	payload := bytes.Repeat([]byte("b"), ingestMsgSize)
	sem := make(chan struct{}, ingestWindow)
	var mu sync.Mutex
	var r ingestResult
	var wg sync.WaitGroup
	start := time.Now()
	for time.Since(start) < d {
		sem <- struct{}{}
		sent := time.Now()
		f, err := js.PublishAsync(subject, payload)
		if err != nil {
			<-sem
			r.refused++
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			select {
			case <-f.Ok():
				mu.Lock()
				r.acked++
				r.lat.lat = append(r.lat.lat, time.Since(sent))
				mu.Unlock()
			case <-f.Err():
				mu.Lock()
				r.refused++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.took = time.Since(start)
	return r
}

// measure takes the ingest part's figures on srv (one server, or a
// cluster's URL list), every stream with the given replicas; down says
// whether a server process exited meanwhile.
func (r *noisyIngest) measure(ctx context.Context, srv *server, world *tenantWorld, replicas int, down func() error) error {
	conns := tenantConns{srv: srv}
	defer conns.close()
	dial := conns.dial
	tA, tB := world.tenants[0], world.tenants[1]
	ncB, err := dial(tB)
	if err != nil {
		return err
	}
	jsB, _ := jetstream.New(ncB, jetstream.WithPublishAsyncMaxPending(ingestWindow), jetstream.WithPublishAsyncTimeout(ingestAckTimeout))
	cctx, cancel := context.WithTimeout(ctx, tenantOpTimeout)
	defer cancel()
	if _, err := jsB.CreateStream(cctx, jetstream.StreamConfig{Name: "OWN", Subjects: []string{"own"}, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("stream OWN of tenant B: %w", err)
	}
	r.alone = asyncPublish(jsB, "own", ingestAlone)
	fmt.Printf("  B alone:   %s\n", r.alone.describe())

	ncA, err := dial(tA)
	if err != nil {
		return err
	}
	jsA, _ := jetstream.New(ncA)
	for i := range ingestFloodStreams {
		name := "FLOOD" + strconv.Itoa(i)
		_, err := jsA.CreateStream(cctx, jetstream.StreamConfig{Name: name, Subjects: []string{"flood." + strconv.Itoa(i)},
			Storage: jetstream.FileStorage, MaxMsgs: ingestFloodMaxMsgs, Discard: jetstream.DiscardOld, Replicas: replicas})
		if err != nil {
			return fmt.Errorf("stream %s of tenant A: %w", name, err)
		}
	}
	payload := bytes.Repeat([]byte("a"), ingestFloodMsgSize)
	var stop atomic.Bool
	var floods sync.WaitGroup
	for i := range ingestFloodStreams {
		nc, err := dial(tA)
		if err != nil {
			stop.Store(true)
			floods.Wait()
			return err
		}
		subject := "flood." + strconv.Itoa(i)
		floods.Go(func() {
			for !stop.Load() && nc.Publish(subject, payload) == nil {
			}
		})
	}
	floodStart := time.Now()
	time.Sleep(ingestWarmup)
	r.flooded = asyncPublish(jsB, "own", ingestFlooded)
	stop.Store(true)
	floods.Wait()
	floodTook := time.Since(floodStart)
	fmt.Printf("  B flooded: %s\n", r.flooded.describe())

	// What A got stored: every message it sent that the server took is
	// applied by the time its own streams answer (asked after the flood,
	// when the API is not queued behind it).
	// A cluster may still be electing after the flood (10008), so an
	// error is retried for a while.
	var stored uint64
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < ingestFloodStreams; {
		ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s, err := jsA.Stream(ictx, "FLOOD"+strconv.Itoa(i))
		cancel()
		switch {
		case err == nil:
			// Stream fetched the info already.
			stored += s.CachedInfo().State.LastSeq
			i++
		case time.Now().After(deadline) || ctx.Err() != nil:
			return fmt.Errorf("stream FLOOD%d of tenant A: %w", i, err)
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	r.aStored = float64(stored) / floodTook.Seconds()
	fmt.Printf("  A stored %s msgs/s over %s of flood\n", commas(int64(r.aStored)), floodTook.Round(time.Millisecond))
	return down()
}

// runIngestSide starts one server and runs the ingest part on it.
func runIngestSide(ctx context.Context, s tenantSide, root string, world *tenantWorld) *noisyIngest {
	r := &noisyIngest{sideOutcome: sideOutcome{side: s.name}}
	r.failed = onServer(ctx, s.name, s.bin, s.args, root, func(srv *server) error {
		return r.measure(ctx, srv, world, 1, func() error {
			if !srv.alive() {
				return fmt.Errorf("server exited: %v", srv.waitErr)
			}
			return nil
		})
	})
	return r
}

// printIngestTable writes one row per server: B's publishing alone and
// during A's flood, and what A stored.
func printIngestTable(out io.Writer, results []*noisyIngest, replicas int) {
	rows := [][]string{{"server", "B alone msgs/s", "p50", "B flooded msgs/s", "p50", "p99", "flooded/alone", "B refused", "A stored msgs/s"}}
	for _, r := range results {
		if r.failed != nil {
			rows = append(rows, []string{r.side, "FAILED"})
			continue
		}
		a, f := r.alone, r.flooded
		share := 0.0
		if a.rate() > 0 {
			share = f.rate() / a.rate()
		}
		rows = append(rows, []string{r.side,
			commas(int64(a.rate())), fmtLatency(a.lat.pct(0.5)),
			commas(int64(f.rate())), fmtLatency(f.lat.pct(0.5)), fmtLatency(f.lat.pct(0.99)),
			strconv.FormatFloat(share, 'f', 3, 64), strconv.Itoa(a.refused + f.refused), commas(int64(r.aStored))})
	}
	fmt.Fprintf(out, "\nB's async publishes (%d in flight, %d B) to its own stream, alone and while A floods %d streams capped at %d messages (%d B core publishes, one connection each); every stream R%d\n\n",
		ingestWindow, ingestMsgSize, ingestFloodStreams, ingestFloodMaxMsgs, ingestFloodMsgSize, replicas)
	writeTable(out, rows, 1)
}
