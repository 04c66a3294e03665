package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCommitterParallel measures the fsync-before-ack publish path of
// the store alone: many goroutines each append a 128-byte message (record
// and subject index entry) through one Committer to a Pebble store on real
// disk, waiting for durability before the next. It reports messages per
// second and messages per fsync (one group is one fsync). "msg+state" also
// rewrites the stream's state record with every message, as the state
// machine does; the /N suffix is publishers per CPU.
func BenchmarkCommitterParallel(b *testing.B) {
	for _, perCPU := range []int{256, 2048} {
		for _, withState := range []bool{false, true} {
			name := "msg"
			if withState {
				name = "msg+state"
			}
			b.Run(fmt.Sprintf("%s/%d", name, perCPU), func(b *testing.B) { benchCommitter(b, withState, perCPU) })
		}
	}
}

func benchCommitter(b *testing.B, withState bool, perCPU int) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := NewCommitter(s, CommitterOptions{})
	defer c.Close()
	var seq, worker atomic.Uint64
	payload := make([]byte, 128)
	b.SetParallelism(perCPU) // × GOMAXPROCS publishers, each with one message in flight
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		stream := worker.Add(1)%16 + 1
		batch := s.NewBatch()
		defer batch.Close()
		errc := make(chan error, 1)
		done := func(err error) { errc <- err }
		m := Message{Subject: "orders.new", Data: payload}
		for pb.Next() {
			m.Seq = seq.Add(1)
			m.Time = int64(m.Seq)
			batch.Reset()
			batch.PutMsg(stream, &m)
			if withState {
				batch.PutStreamState(stream, StreamState{FirstSeq: 1, LastSeq: m.Seq, Msgs: m.Seq, Bytes: m.Seq * 160})
			}
			c.Submit(batch, done)
			if err := <-errc; err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	st := c.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	if st.Groups > 0 {
		b.ReportMetric(float64(st.Items)/float64(st.Groups), "msgs/fsync")
		b.ReportMetric(float64(st.CommitTime.Microseconds())/float64(st.Groups), "µs/group")
	}
}

// BenchmarkCommitterAsync is the pipelined form of the same path, as async
// JetStream publishers drive it: a few goroutines each keep up to 1,024
// messages in flight, and a completion only frees a window slot.
func BenchmarkCommitterAsync(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := NewCommitter(s, CommitterOptions{})
	defer c.Close()
	var seq, worker atomic.Uint64
	payload := make([]byte, 128)
	b.SetParallelism(2)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		stream := worker.Add(1)
		batch := s.NewBatch()
		defer batch.Close()
		window := make(chan struct{}, 1024)
		var failed atomic.Pointer[error]
		done := func(err error) {
			if err != nil {
				e := err // only a failure escapes to the heap
				failed.Store(&e)
			}
			<-window
		}
		m := Message{Subject: "orders.new", Data: payload}
		for pb.Next() {
			window <- struct{}{}
			m.Seq = seq.Add(1)
			m.Time = int64(m.Seq)
			batch.Reset()
			batch.PutMsg(stream, &m)
			c.Submit(batch, done)
		}
		for range cap(window) {
			window <- struct{}{}
		}
		if p := failed.Load(); p != nil {
			b.Error(*p)
		}
	})
	elapsed := time.Since(start)
	st := c.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(st.Items)/float64(max(st.Groups, 1)), "msgs/fsync")
	b.ReportMetric(float64(st.CommitTime.Microseconds())/float64(max(st.Groups, 1)), "µs/group")
}
