package provision

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// fakeConn is a cell connection answering each subject with a scripted
// reply, as nats-server's system services would.
type fakeConn struct {
	mu        sync.Mutex
	down      bool
	replies   map[string]string // subject → reply
	requested []string
}

func (f *fakeConn) IsConnected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down
}

func (f *fakeConn) RequestWithContext(_ context.Context, subject string, _ []byte) (*nats.Msg, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requested = append(f.requested, subject)
	r, ok := f.replies[subject]
	if !ok {
		return nil, nats.ErrTimeout
	}
	return &nats.Msg{Subject: subject, Data: []byte(r)}, nil
}

func (f *fakeConn) Close() {}

func fakeCells(conn *fakeConn) *Cells {
	return &Cells{conns: map[string]cellConn{"c1": conn}, names: []string{"c1"}, timeout: time.Second}
}

const pub = "ADKNAFQCE2Y2HL7WEXH3VAM5H5EHAQ5KA5ARVXCPMJV4K2ETJVXPTQBF"

func TestCellsPush(t *testing.T) {
	subj := "$SYS.REQ.ACCOUNT." + pub + ".CLAIMS.UPDATE"
	for _, tc := range []struct {
		name  string
		conn  *fakeConn
		cell  string
		want  error
		match string
	}{
		{name: "updated", conn: &fakeConn{replies: map[string]string{subj: `{"data":{"code":200,"message":"jwt updated"}}`}}},
		{name: "skipped (not loaded) is success", conn: &fakeConn{replies: map[string]string{subj: `{"data":{"code":200,"message":"jwt update skipped"}}`}}},
		{name: "error reply", conn: &fakeConn{replies: map[string]string{subj: `{"error":{"code":500,"description":"jwt update resulted in error"}}`}},
			want: ErrRejected, match: "500 jwt update resulted in error"},
		{name: "not 200", conn: &fakeConn{replies: map[string]string{subj: `{"data":{"code":400}}`}}, want: ErrRejected},
		{name: "garbage", conn: &fakeConn{replies: map[string]string{subj: `nope`}}, want: ErrRejected},
		{name: "no answer", conn: &fakeConn{}, want: ErrCellUnavailable},
		{name: "disconnected", conn: &fakeConn{down: true}, want: ErrCellUnavailable},
		{name: "unknown cell", conn: &fakeConn{}, cell: "c9", want: ErrUnknownCell},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cell := tc.cell
			if cell == "" {
				cell = "c1"
			}
			err := fakeCells(tc.conn).Push(context.Background(), cell, pub, "a.jwt.token")
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Push = %v, want %v", err, tc.want)
			}
			if tc.match != "" && !strings.Contains(err.Error(), tc.match) {
				t.Fatalf("error %q does not say %q", err, tc.match)
			}
		})
	}
}

func TestCellsUsageNotLoaded(t *testing.T) {
	conn := &fakeConn{replies: map[string]string{
		"$SYS.REQ.ACCOUNT." + pub + ".JSZ": `{"error":{"code":404,"description":"account not found"}}`,
	}}
	u, err := fakeCells(conn).Usage(context.Background(), "c1", pub)
	if err != nil {
		t.Fatal(err)
	}
	if *u != (Usage{}) {
		t.Fatalf("usage of an account the cell has not loaded = %+v, want zero", u)
	}
	if len(conn.requested) != 1 {
		t.Fatalf("requests %v: STATZ is not needed for an account the cell does not have", conn.requested)
	}
}

func TestCellsUsageAndStreams(t *testing.T) {
	conn := &fakeConn{replies: map[string]string{
		"$SYS.REQ.ACCOUNT." + pub + ".JSZ": `{"data":{"memory":10,"storage":300,"stream_detail":[
			{"name":"A","config":{"subjects":["a.>"]},"state":{"messages":2,"bytes":100,"consumer_count":1}},
			{"name":"B","state":{"messages":3,"bytes":200,"consumer_count":2}}]}}`,
		"$SYS.REQ.ACCOUNT." + pub + ".STATZ": `{"data":{"account_statz":[{"acc":"` + pub + `","conns":4},{"acc":"OTHER","conns":9}]}}`,
	}}
	c := fakeCells(conn)
	u, err := c.Usage(context.Background(), "c1", pub)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{Connections: 4, Streams: 2, Consumers: 3, Messages: 5, StorageBytes: 300, MemoryBytes: 10}
	if *u != want {
		t.Fatalf("usage = %+v, want %+v", *u, want)
	}
	st, err := c.Streams(context.Background(), "c1", pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Name != "A" || st[0].Subjects[0] != "a.>" || st[1].Subjects == nil || st[1].Bytes != 200 {
		t.Fatalf("streams = %+v", st)
	}
}

func TestCellsUsageErrors(t *testing.T) {
	conn := &fakeConn{replies: map[string]string{
		"$SYS.REQ.ACCOUNT." + pub + ".JSZ": `{"error":{"code":500,"description":"boom"}}`,
	}}
	if _, err := fakeCells(conn).Usage(context.Background(), "c1", pub); !errors.Is(err, ErrCellUnavailable) {
		t.Fatalf("Usage with a JSZ error = %v, want ErrCellUnavailable", err)
	}
	down := &fakeConn{down: true}
	if _, err := fakeCells(down).Streams(context.Background(), "c1", pub); !errors.Is(err, ErrCellUnavailable) {
		t.Fatalf("Streams with the cell down = %v", err)
	}
	if fakeCells(down).Connected() {
		t.Fatal("Connected with the only cell down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fakeCells(down).WaitConnected(ctx); !errors.Is(err, ErrCellUnavailable) {
		t.Fatalf("WaitConnected = %v", err)
	}
}
