package provision

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// fakeCluster is a clustered cell: every node answers each request.
type fakeCluster struct {
	fakeConn
	answers map[string][]string // subject → one reply per node
}

func (f *fakeCluster) RequestAll(_ context.Context, subject string, _ []byte) ([]*nats.Msg, error) {
	var out []*nats.Msg
	for _, r := range f.answers[subject] {
		out = append(out, &nats.Msg{Subject: subject, Data: []byte(r)})
	}
	if len(out) == 0 {
		return nil, nats.ErrTimeout
	}
	return out, nil
}

// Usage from a clustered cell: each node lists the streams it holds, a
// stream listed twice counts once, and each node's connections add up.
// A push must be accepted by every node.
func TestCellsClusterUsageAndPush(t *testing.T) {
	jsz := "$SYS.REQ.ACCOUNT." + pub + ".JSZ"
	statz := "$SYS.REQ.ACCOUNT." + pub + ".STATZ"
	push := "$SYS.REQ.ACCOUNT." + pub + ".CLAIMS.UPDATE"
	conn := &fakeCluster{answers: map[string][]string{
		jsz: {
			`{"data":{"memory":0,"storage":999,"stream_detail":[{"name":"R3","config":{"subjects":["r3"],"storage":"file"},"state":{"messages":4,"bytes":400,"last_seq":4,"consumer_count":1}}]}}`,
			`{"data":{"memory":0,"storage":999,"stream_detail":[{"name":"M","config":{"subjects":["m"],"storage":"memory"},"state":{"messages":1,"bytes":10,"last_seq":1}},
				{"name":"R3","config":{"subjects":["r3"],"storage":"file"},"state":{"messages":3,"bytes":300,"last_seq":3,"consumer_count":1}}]}}`,
			`{"error":{"code":404,"description":"account not found"}}`,
		},
		statz: {
			`{"data":{"account_statz":[{"acc":"` + pub + `","conns":2}]}}`,
			`{"data":{"account_statz":[{"acc":"` + pub + `","conns":1}]}}`,
		},
		push: {`{"data":{"code":200,"message":"jwt updated"}}`, `{"error":{"code":500,"description":"jwt update resulted in error - older"}}`},
	}}
	c := &Cells{conns: map[string]cellConn{"c1": conn}, names: []string{"c1"}, timeout: time.Second}
	u, err := c.Usage(context.Background(), "c1", pub)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{Connections: 3, Streams: 2, Consumers: 1, Messages: 5, StorageBytes: 400, MemoryBytes: 10}
	if *u != want {
		t.Fatalf("usage = %+v, want %+v", *u, want)
	}
	st, err := c.Streams(context.Background(), "c1", pub)
	if err != nil || len(st) != 2 || st[0].Name != "M" || st[1].Name != "R3" || st[1].Messages != 4 {
		t.Fatalf("streams = %+v, %v", st, err)
	}
	if err := c.Push(context.Background(), "c1", pub, "a.jwt"); err == nil {
		t.Fatal("a push one node refused passed")
	}
}
