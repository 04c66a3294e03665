package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/jsm.go/schemas"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// bareEngine starts an engine on fs with no account registered.
func bareEngine(t *testing.T, fs vfs.FS) (*Engine, func()) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMem()
	e, err := New(Options{Store: st, Memory: mem, ServerVersion: "test", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			e.Close()
			st.Close()
			mem.Close()
		})
	}
	t.Cleanup(closeAll)
	return e, closeAll
}

// register adds an account with lim to e.
func register(t *testing.T, e *Engine, name string, lim *AccountLimits) *fakeAccount {
	t.Helper()
	acc := newFakeAccount(name)
	if err := e.RegisterAccount(acc, lim); err != nil {
		t.Fatal(err)
	}
	return acc
}

// untiered is limits with one "" tier: unlimited but for what set changes.
func untiered(set func(*api.AccountLimits)) *AccountLimits {
	l := unlimitedTier
	set(&l)
	return &AccountLimits{Tiers: map[string]api.AccountLimits{"": l}}
}

// disabledLimits are the limits of an account JWT without JetStream.
var disabledLimits = &AccountLimits{Tiers: map[string]api.AccountLimits{"": {}}}

// errCode returns the err_code of a JSON API reply (0 if none) and
// checks its type.
func errCode(t *testing.T, acc *fakeAccount, subj string, req any, wantType string) api.ErrorCode {
	t.Helper()
	var body []byte
	if req != nil {
		body, _ = json.Marshal(req)
	}
	raw := acc.request(t, subj, nil, body)
	var resp api.Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("%s: %v: %s", subj, err, raw)
	}
	if resp.Type != wantType {
		t.Errorf("%s: type %q, want %q", subj, resp.Type, wantType)
	}
	if resp.Error == nil {
		return 0
	}
	return resp.Error.ErrCode
}

func wantCode(t *testing.T, what string, got, want api.ErrorCode) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: err_code %d, want %d", what, got, want)
	}
}

func createCode(t *testing.T, acc *fakeAccount, cfg api.StreamConfig) api.ErrorCode {
	t.Helper()
	return errCode(t, acc, "$JS.API.STREAM.CREATE."+cfg.Name, cfg, api.TypeStreamCreateResponse)
}

func consumerCode(t *testing.T, acc *fakeAccount, stream string, cfg api.ConsumerConfig) api.ErrorCode {
	t.Helper()
	subj := "$JS.API.CONSUMER.CREATE." + stream
	if cfg.Durable != "" {
		subj += "." + cfg.Durable
	}
	return errCode(t, acc, subj, api.ConsumerCreateRequest{Stream: stream, Config: cfg}, api.TypeConsumerCreateResponse)
}

func streamInfo(t *testing.T, acc *fakeAccount, name string) *api.StreamInfo {
	t.Helper()
	var resp api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &resp)
	if resp.Error != nil {
		t.Fatalf("stream info %s: %v", name, resp.Error)
	}
	return resp.StreamInfo
}

func accountInfo(t *testing.T, acc *fakeAccount) *api.AccountInfo {
	t.Helper()
	var resp api.AccountInfoResponse
	acc.apiCall(t, "$JS.API.INFO", nil, &resp)
	if resp.Error != nil {
		t.Fatalf("account info: %v", resp.Error)
	}
	return resp.AccountInfo
}

// pubCode publishes and returns the refusal's err_code, 0 for a PubAck.
func pubCode(t *testing.T, acc *fakeAccount, subj string, data []byte) api.ErrorCode {
	t.Helper()
	if ack := publish(t, acc, subj, nil, data); ack.Error != nil {
		return ack.Error.ErrCode
	}
	return 0
}

func mustPublish(t *testing.T, acc *fakeAccount, subj string, data []byte) uint64 {
	t.Helper()
	ack := publish(t, acc, subj, nil, data)
	if ack.Error != nil {
		t.Fatalf("publish %s: %v", subj, ack.Error)
	}
	return ack.Sequence
}

func TestAccountsWithSameStreamNamesAreIndependent(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	a := register(t, e, "A", nil)
	b := register(t, e, "B", untiered(func(l *api.AccountLimits) { l.MaxStreams = 1 }))
	for _, acc := range []*fakeAccount{a, b} {
		createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	}
	mustPublish(t, a, "s.1", []byte("a1"))
	mustPublish(t, a, "s.2", []byte("a2"))
	mustPublish(t, b, "s.1", []byte("b1"))
	if n := streamInfo(t, a, "S").State.Msgs; n != 2 {
		t.Fatalf("A's S holds %d messages, want 2", n)
	}
	if n := streamInfo(t, b, "S").State.Msgs; n != 1 {
		t.Fatalf("B's S holds %d messages, want 1", n)
	}
	// B's stream limit counts B's streams only.
	wantCode(t, "B second stream", createCode(t, b, api.StreamConfig{Name: "T"}), api.CodeMaxStreamsReached)
	createStream(t, a, api.StreamConfig{Name: "T"})
	var del api.SuccessResponse
	a.apiCall(t, "$JS.API.STREAM.DELETE.S", nil, &del)
	if !del.Success {
		t.Fatalf("delete: %+v", del)
	}
	if n := streamInfo(t, b, "S").State.Msgs; n != 1 {
		t.Fatalf("B's S after A deleted its S holds %d messages, want 1", n)
	}
	ua, _ := e.AccountUsage("A")
	ub, _ := e.AccountUsage("B")
	if ua.Streams != 1 || ub.Streams != 1 || ub.Messages != 1 {
		t.Fatalf("usage A %+v, B %+v", ua, ub)
	}
}

func TestDisabledAccountGets10039(t *testing.T) {
	for _, lim := range []*AccountLimits{disabledLimits, {}} {
		e, _ := bareEngine(t, vfs.NewMem())
		acc := register(t, e, "A", lim)
		cases := []struct {
			subj, typ string
			req       any
		}{
			{"$JS.API.INFO", api.TypeAccountInfoResponse, nil},
			{"$JS.API.STREAM.CREATE.S", api.TypeStreamCreateResponse, api.StreamConfig{Name: "S"}},
			{"$JS.API.STREAM.NAMES", api.TypeStreamNamesResponse, nil},
			{"$JS.API.STREAM.LIST", api.TypeStreamListResponse, nil},
			{"$JS.API.STREAM.INFO.S", api.TypeStreamInfoResponse, nil},
			{"$JS.API.CONSUMER.CREATE.S", api.TypeConsumerCreateResponse, api.ConsumerCreateRequest{Stream: "S"}},
			{"$JS.API.CONSUMER.NAMES.S", api.TypeConsumerNamesResponse, nil},
			{"$JS.API.STREAM.CREATE.S", api.TypeStreamCreateResponse, "not json"},
		}
		for _, c := range cases {
			wantCode(t, c.subj, errCode(t, acc, c.subj, c.req, c.typ), api.CodeNotEnabledForAccount)
		}
		// A pull request has nobody to serve it.
		hdr := acc.request(t, "$JS.API.CONSUMER.MSG.NEXT.S.C", nil, []byte(`{"batch":1}`))
		if len(hdr) != 0 {
			t.Fatalf("pull on a disabled account: %q", hdr)
		}
		if u, ok := e.AccountUsage("A"); !ok || u.Enabled || u.APITotal != 0 {
			t.Fatalf("usage %+v %v: want registered, disabled, no API stats", u, ok)
		}
		if len(e.Accounts()) != 0 {
			t.Fatalf("/jsz lists a disabled account: %+v", e.Accounts())
		}
	}
}

// The harness delivers a header-only status as an empty payload; check
// the status itself through a subscription.
func TestDisabledAccountPullHearsNoResponders(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", disabledLimits)
	got := inbox(t, acc, "_INBOX.pull")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.pull", nil, []byte(`{"batch":1}`))
	if d := next(t, got); !strings.HasPrefix(d.hdr, "NATS/1.0 503") {
		t.Fatalf("pull reply %+v, want 503", d)
	}
}

func TestDisabledAccountDomainAPI(t *testing.T) {
	st := store.NewMem()
	mem := store.NewMem()
	e, err := New(Options{Store: st, Memory: mem, Domain: "hub", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close(); mem.Close() })
	acc := register(t, e, "A", disabledLimits)
	wantCode(t, "domain info", errCode(t, acc, "$JS.hub.API.INFO", nil, api.TypeAccountInfoResponse), api.CodeNotEnabledForAccount)
}

func TestMaxStreams(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxStreams = 2 }))
	createStream(t, acc, api.StreamConfig{Name: "S1"})
	createStream(t, acc, api.StreamConfig{Name: "S2"})
	wantCode(t, "third stream", createCode(t, acc, api.StreamConfig{Name: "S3"}), api.CodeMaxStreamsReached)
	// Repeating a create, or updating, is not a new stream.
	wantCode(t, "repeat create", createCode(t, acc, api.StreamConfig{Name: "S2"}), 0)
	wantCode(t, "update", errCode(t, acc, "$JS.API.STREAM.UPDATE.S2", api.StreamConfig{Name: "S2", MaxMsgs: 5},
		api.TypeStreamUpdateResponse), 0)
	// Raised live: the next create passes.
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxStreams = 3 })); err != nil {
		t.Fatal(err)
	}
	createStream(t, acc, api.StreamConfig{Name: "S3"})
	// Lowered live: nothing is deleted, the next create is refused.
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxStreams = 1 })); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "after lowering", createCode(t, acc, api.StreamConfig{Name: "S4"}), api.CodeMaxStreamsReached)
	if n := accountInfo(t, acc).Streams; n != 3 {
		t.Fatalf("account holds %d streams after lowering, want 3", n)
	}
}

// TestMaxConsumersPerStream: the account's max_consumers bounds each
// stream's consumers (ephemerals included), as nats-server enforces the
// JWT's consumer limit, together with the stream's own max_consumers.
func TestMaxConsumersPerStream(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxConsumers = 2 }))
	createStream(t, acc, api.StreamConfig{Name: "S1", Subjects: []string{"a"}})
	createStream(t, acc, api.StreamConfig{Name: "S2", Subjects: []string{"b"}})
	wantCode(t, "durable", consumerCode(t, acc, "S1", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit}), 0)
	wantCode(t, "ephemeral", consumerCode(t, acc, "S1", api.ConsumerConfig{AckPolicy: api.AckExplicit,
		InactiveThreshold: time.Hour}), 0)
	wantCode(t, "third consumer of a stream", consumerCode(t, acc, "S1", api.ConsumerConfig{Durable: "E", AckPolicy: api.AckExplicit}),
		api.CodeMaxConsumersReached)
	// Another stream has its own allowance.
	wantCode(t, "other stream", consumerCode(t, acc, "S2", api.ConsumerConfig{Durable: "E", AckPolicy: api.AckExplicit}), 0)
	// Updating an existing consumer is not a new one.
	wantCode(t, "update", consumerCode(t, acc, "S1", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit,
		Description: "now described"}), 0)
	// A stream may not promise more consumers than the account allows,
	// and the lower of the two limits governs.
	wantCode(t, "stream max_consumers", createCode(t, acc, api.StreamConfig{Name: "S3", MaxConsumers: 3}),
		api.CodeMaxConsumersReached)
	createStream(t, acc, api.StreamConfig{Name: "S4", Subjects: []string{"d"}, MaxConsumers: 1})
	wantCode(t, "first of S4", consumerCode(t, acc, "S4", api.ConsumerConfig{Durable: "A", AckPolicy: api.AckExplicit}), 0)
	wantCode(t, "second of S4", consumerCode(t, acc, "S4", api.ConsumerConfig{Durable: "B", AckPolicy: api.AckExplicit}),
		api.CodeMaxConsumersReached)
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxConsumers = 3 })); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "after raising", consumerCode(t, acc, "S1", api.ConsumerConfig{Durable: "E", AckPolicy: api.AckExplicit}), 0)
	if info := accountInfo(t, acc); info.Consumers != 5 {
		t.Fatalf("account info counts %d consumers, want 5", info.Consumers)
	}
}

func TestMaxAckPending(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxAckPending = 100 }))
	createStream(t, acc, api.StreamConfig{Name: "S"})
	wantCode(t, "above the limit", consumerCode(t, acc, "S", api.ConsumerConfig{Durable: "C1", AckPolicy: api.AckExplicit,
		MaxAckPending: 101}), api.CodeConsumerMaxAckPendingExcess)
	// Unset, it defaults to the account's limit when that is below 1000.
	resp := createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C2", AckPolicy: api.AckExplicit})
	if got := resp.Config.MaxAckPending; got != 100 {
		t.Fatalf("default max_ack_pending %d, want the account's 100", got)
	}
	// 0 in the JWT means unlimited: the usual default applies.
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxAckPending = 0 })); err != nil {
		t.Fatal(err)
	}
	resp = createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C3", AckPolicy: api.AckExplicit})
	if got := resp.Config.MaxAckPending; got != api.DefaultMaxAckPending {
		t.Fatalf("default max_ack_pending %d, want %d", got, api.DefaultMaxAckPending)
	}
	wantCode(t, "unlimited", consumerCode(t, acc, "S", api.ConsumerConfig{Durable: "C4", AckPolicy: api.AckExplicit,
		MaxAckPending: 100000}), 0)
}

func TestMaxStreamBytes(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) {
		l.StoreMaxStreamBytes, l.MemoryMaxStreamBytes = 1000, 500
	}))
	wantCode(t, "file max_bytes above", createCode(t, acc, api.StreamConfig{Name: "F", MaxBytes: 1001}),
		api.CodeStreamMaxBytesExceeded)
	wantCode(t, "memory max_bytes above", createCode(t, acc, api.StreamConfig{Name: "M", MaxBytes: 501,
		Storage: api.MemoryStorage}), api.CodeStreamMaxBytesExceeded)
	wantCode(t, "at the ceiling", createCode(t, acc, api.StreamConfig{Name: "F", MaxBytes: 1000}), 0)
	wantCode(t, "update above", errCode(t, acc, "$JS.API.STREAM.UPDATE.F", api.StreamConfig{Name: "F", MaxBytes: 2000},
		api.TypeStreamUpdateResponse), api.CodeStreamMaxBytesExceeded)
	// Without max_bytes the stream is accepted as asked (nats-server does
	// not fill it in) and its writes stop at the ceiling.
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}})
	if mb := streamInfo(t, acc, "U").Config.MaxBytes; mb != -1 {
		t.Fatalf("max_bytes %d, want -1", mb)
	}
	payload := bytes.Repeat([]byte("x"), 200)
	var stored int
	for range 10 {
		ack := publish(t, acc, "u", nil, payload)
		if ack.Error != nil {
			wantCode(t, "publish past the ceiling", ack.Error.ErrCode, api.CodeAccountResourcesExceeded)
			break
		}
		stored++
	}
	if st := streamInfo(t, acc, "U").State; stored != 4 || st.Msgs != 4 || st.Bytes > 1000 {
		t.Fatalf("stored %d, state %+v: want 4 messages within 1000 bytes", stored, st)
	}
}

func TestMaxBytesRequired(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxBytesRequired = true }))
	wantCode(t, "no max_bytes", createCode(t, acc, api.StreamConfig{Name: "S"}), api.CodeStreamMaxBytesRequired)
	wantCode(t, "with max_bytes", createCode(t, acc, api.StreamConfig{Name: "S", MaxBytes: 1 << 20}), 0)
	wantCode(t, "update dropping it", errCode(t, acc, "$JS.API.STREAM.UPDATE.S", api.StreamConfig{Name: "S"},
		api.TypeStreamUpdateResponse), api.CodeStreamMaxBytesRequired)
}

func TestTierSelection(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	r1 := unlimitedTier
	r1.MaxStreams = 1
	acc := register(t, e, "A", &AccountLimits{Tiers: map[string]api.AccountLimits{"R1": r1, "R3": unlimitedTier}})
	createStream(t, acc, api.StreamConfig{Name: "S1"})
	wantCode(t, "R1 tier full", createCode(t, acc, api.StreamConfig{Name: "S2"}), api.CodeMaxStreamsReached)
	// The R3 tier exists, but a single node cannot replicate.
	wantCode(t, "R3", createCode(t, acc, api.StreamConfig{Name: "S3", Replicas: 3}), api.CodeReplicasNotSupported)
	// R5 has no tier: nats-server says so before anything else.
	wantCode(t, "R5", createCode(t, acc, api.StreamConfig{Name: "S5", Replicas: 5}), api.CodeNoLimits)

	b := register(t, e, "B", &AccountLimits{Tiers: map[string]api.AccountLimits{"R3": unlimitedTier}})
	wantCode(t, "no R1 tier", createCode(t, b, api.StreamConfig{Name: "S"}), api.CodeNoLimits)

	// Untiered limits govern every replica count.
	c := register(t, e, "C", untiered(func(*api.AccountLimits) {}))
	wantCode(t, "untiered R3", createCode(t, c, api.StreamConfig{Name: "S", Replicas: 3}), api.CodeReplicasNotSupported)

	// A tier removed live stops new consumers and writes of its streams.
	d := register(t, e, "D", &AccountLimits{Tiers: map[string]api.AccountLimits{"R1": unlimitedTier}})
	createStream(t, d, api.StreamConfig{Name: "P", Subjects: []string{"p"}})
	if err := e.UpdateAccount("D", &AccountLimits{Tiers: map[string]api.AccountLimits{"R3": unlimitedTier}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "publish without tier", pubCode(t, d, "p", []byte("x")), api.CodeNoLimits)
	wantCode(t, "consumer without tier", consumerCode(t, d, "P", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit}),
		api.CodeNoLimits)

	if err := e.RegisterAccount(newFakeAccount("E"), &AccountLimits{Tiers: map[string]api.AccountLimits{"r1": unlimitedTier}}); err == nil {
		t.Fatal("a tier named r1 was accepted")
	}
}

func TestReservations(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxStore, l.MaxMemory = 10000, 2000 }))
	createStream(t, acc, api.StreamConfig{Name: "R", Subjects: []string{"r"}, MaxBytes: 6000})
	wantCode(t, "file reservation past the limit", createCode(t, acc, api.StreamConfig{Name: "X", MaxBytes: 5000}),
		api.CodeStorageResourcesExceeded)
	wantCode(t, "memory reservation past the limit", createCode(t, acc, api.StreamConfig{Name: "X", MaxBytes: 3000,
		Storage: api.MemoryStorage}), api.CodeMemoryResourcesExceeded)
	wantCode(t, "memory reservation within", createCode(t, acc, api.StreamConfig{Name: "M", Subjects: []string{"m"},
		MaxBytes: 2000, Storage: api.MemoryStorage}), 0)
	// Memory is full: even a stream without max_bytes needs a byte.
	wantCode(t, "memory full", createCode(t, acc, api.StreamConfig{Name: "M2", Storage: api.MemoryStorage}),
		api.CodeMemoryResourcesExceeded)

	// A stream without max_bytes counts what it holds.
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}})
	payload := bytes.Repeat([]byte("x"), 983) // 1000 bytes stored with subject "u" and overhead
	for range 3 {
		mustPublish(t, acc, "u", payload)
	}
	// 6000 reserved + 3000 held: a 1001 byte reservation does not fit.
	wantCode(t, "beside usage", createCode(t, acc, api.StreamConfig{Name: "X", MaxBytes: 1001}),
		api.CodeStorageResourcesExceeded)
	wantCode(t, "fits beside usage", createCode(t, acc, api.StreamConfig{Name: "X", MaxBytes: 1000}), 0)

	// Updates: growing past the limit is refused, shrinking always passes.
	update := func(maxBytes int64) api.ErrorCode {
		return errCode(t, acc, "$JS.API.STREAM.UPDATE.R", api.StreamConfig{Name: "R", Subjects: []string{"r"}, MaxBytes: maxBytes},
			api.TypeStreamUpdateResponse)
	}
	wantCode(t, "grow R", update(6001), api.CodeStorageResourcesExceeded)
	wantCode(t, "shrink R", update(5000), 0)
	wantCode(t, "grow R back", update(6000), 0)

	info := accountInfo(t, acc)
	if info.ReservedStore != 7000 || info.ReservedMemory != 2000 || info.Store != 3000 {
		t.Fatalf("account info %+v: want 7000 file and 2000 memory reserved, 3000 stored", info.Tier)
	}
	u, _ := e.AccountUsage("A")
	if u.ReservedStore != 7000 || u.ReservedMemory != 2000 || u.StoreBytes != 3000 || u.Streams != 4 || u.Messages != 3 {
		t.Fatalf("usage %+v", u)
	}
}

func TestFullAccountRefusesPublish(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxStore = 1000 }))
	// R reserves 600: the unreserved stream gets the other 400.
	createStream(t, acc, api.StreamConfig{Name: "R", Subjects: []string{"r"}, MaxBytes: 600})
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}})
	payload := bytes.Repeat([]byte("x"), 83) // 100 bytes stored
	for range 4 {
		mustPublish(t, acc, "u", payload)
	}
	before := streamInfo(t, acc, "U").State
	ack := publish(t, acc, "u", nil, payload)
	if ack.Error == nil {
		t.Fatalf("publish past the limit stored at seq %d", ack.Sequence)
	}
	wantCode(t, "full account", ack.Error.ErrCode, api.CodeAccountResourcesExceeded)
	if ack.PubAck == nil || ack.Stream != "U" || ack.Sequence != 0 {
		t.Fatalf("refusal %+v: want the stream named and no sequence", ack.PubAck)
	}
	after := streamInfo(t, acc, "U").State
	if after.Msgs != before.Msgs || after.Bytes != before.Bytes || after.LastSeq != before.LastSeq {
		t.Fatalf("state moved on a refused publish: %+v -> %+v", before, after)
	}
	// The reserved stream still has its 600, and discards its oldest
	// beyond them.
	for range 8 {
		mustPublish(t, acc, "r", payload)
	}
	if st := streamInfo(t, acc, "R").State; st.Bytes > 600 || st.Msgs != 6 {
		t.Fatalf("reserved stream state %+v", st)
	}
	// Freeing space lets writes in again.
	var purge api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.U", nil, &purge)
	if !purge.Success {
		t.Fatalf("purge %+v", purge)
	}
	mustPublish(t, acc, "u", payload)

	// Memory: the same refusal, with a memory limit.
	mem := register(t, e, "M", untiered(func(l *api.AccountLimits) { l.MaxMemory = 250 }))
	createStream(t, mem, api.StreamConfig{Name: "U", Subjects: []string{"u"}, Storage: api.MemoryStorage})
	mustPublish(t, mem, "u", payload)
	mustPublish(t, mem, "u", payload)
	wantCode(t, "full memory", pubCode(t, mem, "u", payload), api.CodeAccountResourcesExceeded)
}

func TestLoweredStorageLimitKeepsData(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", untiered(func(l *api.AccountLimits) { l.MaxStore = 1000 }))
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}})
	createStream(t, acc, api.StreamConfig{Name: "R", Subjects: []string{"r"}, MaxBytes: 300})
	payload := bytes.Repeat([]byte("x"), 83)
	for range 5 {
		mustPublish(t, acc, "u", payload)
	}
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxStore = 400 })); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, acc, "U").State; st.Msgs != 5 {
		t.Fatalf("lowering the limit removed data: %+v", st)
	}
	wantCode(t, "publish over the lowered limit", pubCode(t, acc, "u", payload),
		api.CodeAccountResourcesExceeded)
	// Over the limit, even a reserved stream takes nothing more.
	wantCode(t, "reserved stream over the lowered limit", pubCode(t, acc, "r", payload),
		api.CodeAccountResourcesExceeded)
	wantCode(t, "create over the lowered limit", createCode(t, acc, api.StreamConfig{Name: "X"}),
		api.CodeStorageResourcesExceeded)
	if err := e.UpdateAccount("A", untiered(func(l *api.AccountLimits) { l.MaxStore = 2000 })); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, acc, "u", payload)
	mustPublish(t, acc, "r", payload)
}

func TestDisableAndEnableKeepStreamsAndConsumers(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	on := untiered(func(*api.AccountLimits) {})
	acc := register(t, e, "A", on)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxAge: time.Hour})
	for i := range 3 {
		mustPublish(t, acc, "s", []byte(fmt.Sprint(i)))
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit})
	createConsumer(t, acc, "S", api.ConsumerConfig{AckPolicy: api.AckExplicit, InactiveThreshold: time.Hour}) // ephemeral
	got := inbox(t, acc, "_INBOX.pull")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.D", "_INBOX.pull", nil, []byte(`{"batch":1}`))
	d := next(t, got)
	acc.request(t, d.reply, nil, []byte("+ACK")) // double ack: answered once applied

	if err := e.UpdateAccount("A", disabledLimits); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "info while disabled", errCode(t, acc, "$JS.API.INFO", nil, api.TypeAccountInfoResponse),
		api.CodeNotEnabledForAccount)
	if acc.HasInterest("s") {
		t.Fatal("a disabled account's stream still captures its subject")
	}
	if acc.HasInterest("$JS.ACK.S.D.>") {
		t.Fatal("a disabled account's consumer still listens for acks")
	}
	u, ok := e.AccountUsage("A")
	if !ok || u.Enabled || u.Streams != 1 || u.Messages != 3 || u.Consumers != 1 {
		t.Fatalf("usage while disabled %+v: want the stored stream and its durable consumer", u)
	}

	if err := e.UpdateAccount("A", on); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, acc, "S").State; st.Msgs != 3 || st.Consumers != 1 {
		t.Fatalf("state after re-enabling %+v: want 3 messages and the durable only", st)
	}
	var ci api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.D", nil, &ci)
	if ci.Error != nil || ci.AckFloor.Stream != 1 || ci.NumPending != 2 {
		t.Fatalf("durable after re-enabling: %+v", ci)
	}
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.D", "_INBOX.pull", nil, []byte(`{"batch":1}`))
	if d := next(t, got); d.data != "1" {
		t.Fatalf("next delivery %+v, want message 1", d)
	}
	mustPublish(t, acc, "s", []byte("3"))
}

func TestRestartIntoDisabledAccountThenEnable(t *testing.T) {
	fs := vfs.NewMem()
	e, closeAll := bareEngine(t, fs)
	on := untiered(func(l *api.AccountLimits) { l.MaxStore = 1 << 20 })
	acc := register(t, e, "A", on)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxBytes: 1 << 19})
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}})
	mustPublish(t, acc, "s", []byte("kept"))
	mustPublish(t, acc, "u", bytes.Repeat([]byte("x"), 1000))
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit})
	closeAll()

	e, _ = bareEngine(t, fs)
	acc = register(t, e, "A", disabledLimits)
	wantCode(t, "names while disabled", errCode(t, acc, "$JS.API.STREAM.NAMES", nil, api.TypeStreamNamesResponse),
		api.CodeNotEnabledForAccount)
	if u, ok := e.AccountUsage("A"); !ok || u.Streams != 2 || u.ReservedStore != 1<<19 {
		t.Fatalf("usage of the stored streams %+v", u)
	}
	if err := e.UpdateAccount("A", on); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, acc, "S").State; st.Msgs != 1 || st.Consumers != 1 {
		t.Fatalf("recovered stream %+v", st)
	}
	// The recovered streams count against the limit: S reserves half a
	// MiB and U holds about a KiB, so half a MiB more does not fit.
	wantCode(t, "reservation beside recovered streams", createCode(t, acc, api.StreamConfig{Name: "X", MaxBytes: 1 << 19}),
		api.CodeStorageResourcesExceeded)
	mustPublish(t, acc, "s", []byte("more"))
}

func TestRemoveAccountKeepsData(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "A", nil)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	mustPublish(t, acc, "s", []byte("x"))
	e.RemoveAccount("A")
	if acc.HasInterest("$JS.API.INFO") || acc.HasInterest("s") {
		t.Fatal("a removed account is still served")
	}
	if u, ok := e.AccountUsage("A"); !ok || u.Messages != 1 || u.Enabled {
		t.Fatalf("usage of a removed account %+v %v: want its stored data", u, ok)
	}
	if _, ok := e.AccountUsage("nobody"); ok {
		t.Fatal("usage reported for an unknown account")
	}
	if err := e.UpdateAccount("A", nil); err == nil {
		t.Fatal("updated a removed account")
	}
	acc = register(t, e, "A", nil)
	if st := streamInfo(t, acc, "S").State; st.Msgs != 1 {
		t.Fatalf("re-registered account's stream %+v", st)
	}
}

// validateAccountInfo checks a $JS.API.INFO reply as natscli v0.5.0 does,
// against jsm.go's schema.
func validateAccountInfo(t *testing.T, raw []byte) {
	t.Helper()
	src, err := schemas.Load("jetstream/api/v1/account_info_response.json")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.CompileString("schema.json", string(src))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("account info fails natscli's schema: %v\n%s", err, raw)
	}
}

func TestAccountInfoReportsLimits(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())

	flat := untiered(func(l *api.AccountLimits) { l.MaxStore, l.MaxStreams = 1<<20, 10 })
	a := register(t, e, "A", flat)
	createStream(t, a, api.StreamConfig{Name: "S", MaxBytes: 1000})
	raw := a.request(t, "$JS.API.INFO", nil, nil)
	validateAccountInfo(t, raw)
	var resp api.AccountInfoResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Limits != flat.Tiers[""] || resp.Tiers != nil || resp.Streams != 1 || resp.ReservedStore != 1000 {
		t.Fatalf("untiered account info %s", raw)
	}

	r1 := unlimitedTier
	r1.MaxStore, r1.MaxConsumers = 1<<20, 5
	r3 := unlimitedTier
	r3.MaxStore = 1 << 30
	b := register(t, e, "B", &AccountLimits{Tiers: map[string]api.AccountLimits{"R1": r1, "R3": r3}})
	createStream(t, b, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxBytes: 4000})
	mustPublish(t, b, "s", []byte("x"))
	createConsumer(t, b, "S", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit})
	raw = b.request(t, "$JS.API.INFO", nil, nil)
	validateAccountInfo(t, raw)
	resp = api.AccountInfoResponse{}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	got1, got3 := resp.Tiers["R1"], resp.Tiers["R3"]
	switch {
	case len(resp.Tiers) != 2,
		resp.Limits != (api.AccountLimits{}),
		resp.Streams != 1, resp.Consumers != 1, resp.ReservedStore != 4000,
		got1.Limits != r1, got1.Streams != 1, got1.Consumers != 1, got1.ReservedStore != 4000, got1.Store == 0,
		got3.Limits != r3, got3.Streams != 0, got3.Store != 0:
		t.Fatalf("tiered account info %s", raw)
	}

	// /jsz's account details carry the same.
	accts := e.Accounts()
	if len(accts) != 2 || accts[1].Name != "B" || accts[1].ReservedStore != 4000 || accts[1].Consumers != 1 ||
		accts[1].Messages != 1 || len(accts[1].Streams) != 1 || accts[1].Streams[0].Consumers != 1 ||
		accts[1].Limits.Tiers["R1"] != r1 {
		t.Fatalf("accounts %+v", accts)
	}
	if snap := e.Snapshot(); snap.Streams != 2 || snap.Consumers != 1 || snap.ReservedStore != 5000 {
		t.Fatalf("snapshot %+v", snap)
	}
}

// TestLimitsRaceWithTraffic changes limits, and turns JetStream off and on,
// while clients publish and create consumers, for the race detector.
func TestLimitsRaceWithTraffic(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	on := untiered(func(l *api.AccountLimits) { l.MaxStore = 1 << 20 })
	acc := register(t, e, "A", on)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				subj := fmt.Sprintf("s.%d.%d", w, i)
				// Publishes race with disabling: each gets an ack, a
				// refusal, or (disabled) no subscriber at all.
				acc.Publish(subj, "", nil, []byte("x"))
				if i%10 == 0 {
					acc.request(t, "$JS.API.INFO", nil, nil)
				}
			}
		}()
	}
	for i := range 10 {
		lim := on
		if i%2 == 0 {
			lim = disabledLimits
		}
		if err := e.UpdateAccount("A", lim); err != nil {
			t.Fatal(err)
		}
		e.AccountUsage("A")
		e.Accounts()
	}
	wg.Wait()
	if err := e.UpdateAccount("A", on); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, acc, "S").State; st.Consumers != 1 {
		t.Fatalf("after the churn %+v: want the durable back", st)
	}
}

// TestDisableKeepsInterestRetention: parking consumers must not look like
// losing interest, which would drop what a parked consumer still needs.
func TestDisableKeepsInterestRetention(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	on := untiered(func(*api.AccountLimits) {})
	acc := register(t, e, "A", on)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, Retention: api.InterestPolicy})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C1", AckPolicy: api.AckExplicit})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C2", AckPolicy: api.AckExplicit})
	createConsumer(t, acc, "S", api.ConsumerConfig{AckPolicy: api.AckExplicit, InactiveThreshold: time.Hour})
	mustPublish(t, acc, "s", []byte("m"))
	got := inbox(t, acc, "_INBOX.c1")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C1", "_INBOX.c1", nil, []byte(`{"batch":1}`))
	acc.request(t, next(t, got).reply, nil, []byte("+ACK"))

	for _, lim := range []*AccountLimits{disabledLimits, on} {
		if err := e.UpdateAccount("A", lim); err != nil {
			t.Fatal(err)
		}
	}
	if st := streamInfo(t, acc, "S").State; st.Msgs != 1 || st.Consumers != 2 {
		t.Fatalf("after disable and enable %+v: want the message C2 still needs, and the two durables", st)
	}
	got2 := inbox(t, acc, "_INBOX.c2")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C2", "_INBOX.c2", nil, []byte(`{"batch":1}`))
	d := next(t, got2)
	if d.data != "m" {
		t.Fatalf("C2 got %+v", d)
	}
	acc.request(t, d.reply, nil, []byte("+ACK"))
	if st := streamInfo(t, acc, "S").State; st.Msgs != 0 {
		t.Fatalf("after both acked %+v: want the message gone", st)
	}
}

// TestServerReservationAcrossAccounts: creates racing in two accounts
// cannot both claim the server's last room (max_file_store): the check
// and the claim are one step.
func TestServerReservationAcrossAccounts(t *testing.T) {
	e, a, _ := openEngine(t, vfs.NewMem(), func(o *Options) { o.MaxFileStore = 100 })
	b := register(t, e, "B", untiered(func(*api.AccountLimits) {}))
	for round := range 50 {
		codes := make([]api.ErrorCode, 2)
		var wg sync.WaitGroup
		for i, acc := range []*fakeAccount{a, b} {
			wg.Go(func() {
				codes[i] = createCode(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxBytes: 60})
			})
		}
		wg.Wait()
		ok := 0
		for i, c := range codes {
			switch c {
			case 0:
				ok++
				acc := []*fakeAccount{a, b}[i]
				if c := errCode(t, acc, "$JS.API.STREAM.DELETE.S", nil, api.TypeStreamDeleteResponse); c != 0 {
					t.Fatalf("round %d: delete: err_code %d", round, c)
				}
			case api.CodeStorageResourcesExceeded:
			default:
				t.Fatalf("round %d: create: err_code %d", round, c)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of two 60-byte reservations fit in 100 bytes (codes %v)", round, ok, codes)
		}
	}
}
