package main

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The legacy JetStreamContext (nc.JetStream()), which many applications
// still use: the same stream API, through older code paths and types.
func TestJSLegacyContext(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	nc := connect(t, n.URL)
	js, err := nc.JetStream(nats.MaxWait(ioTimeout))
	if err != nil {
		t.Fatal(err)
	}

	ai, err := js.AccountInfo()
	if err != nil || ai.Streams != 0 {
		t.Fatalf("AccountInfo: %+v %v", ai, err)
	}
	if _, err := js.StreamInfo("NOPE"); !errors.Is(err, nats.ErrStreamNotFound) {
		t.Errorf("StreamInfo(NOPE): %v, want ErrStreamNotFound", err)
	}

	cfg := &nats.StreamConfig{Name: "LEG", Subjects: []string{"leg.>"}, MaxMsgs: 1000, Duplicates: time.Minute,
		Description: "legacy", AllowDirect: true}
	info, err := js.AddStream(cfg)
	if err != nil {
		t.Fatalf("AddStream: %v", err)
	}
	if info.Config.Name != "LEG" || info.Config.MaxMsgs != 1000 || info.Config.Storage != nats.FileStorage || info.Config.MaxBytes != -1 {
		t.Errorf("AddStream config %+v", info.Config)
	}
	if _, err := js.AddStream(cfg); err != nil {
		t.Errorf("AddStream again with the same config: %v", err)
	}
	other := *cfg
	other.MaxMsgs = 1
	if _, err := js.AddStream(&other); !errors.Is(err, nats.ErrStreamNameAlreadyInUse) {
		t.Errorf("AddStream with another config: %v, want ErrStreamNameAlreadyInUse", err)
	}
	_, err = js.AddStream(&nats.StreamConfig{Name: "LEG2", Subjects: []string{"leg.x"}})
	wantLegacyErr(t, "AddStream overlapping", err, 10065)

	// Sync and async publishes.
	for i := range 5 {
		if _, err := js.Publish("leg."+strconv.Itoa(i%2), []byte("sync "+strconv.Itoa(i)), nats.MsgId("s"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var futures []nats.PubAckFuture
	for i := range 200 {
		f, err := js.PublishAsync("leg.async", []byte("async "+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(ioTimeout):
		t.Fatal("async publishes not acknowledged")
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != uint64(6+i) || ack.Stream != "LEG" {
				t.Fatalf("async publish %d: %+v", i, ack)
			}
		case err := <-f.Err():
			t.Fatalf("async publish %d: %v", i, err)
		}
	}

	// Reads: by sequence, last by subject, direct.
	m, err := js.GetMsg("LEG", 1)
	if err != nil || string(m.Data) != "sync 0" || m.Subject != "leg.0" || m.Header.Get("Nats-Msg-Id") != "s0" {
		t.Errorf("GetMsg 1: %+v %v", m, err)
	}
	m, err = js.GetLastMsg("LEG", "leg.1")
	if err != nil || m.Sequence != 4 {
		t.Errorf("GetLastMsg leg.1: %+v %v", m, err)
	}
	m, err = js.GetMsg("LEG", 3, nats.DirectGet())
	if err != nil || string(m.Data) != "sync 2" {
		t.Errorf("GetMsg 3 direct: %+v %v", m, err)
	}
	m, err = js.GetLastMsg("LEG", "leg.async", nats.DirectGet())
	if err != nil || m.Sequence != 205 {
		t.Errorf("GetLastMsg direct: %+v %v", m, err)
	}
	if _, err := js.GetMsg("LEG", 9999); !errors.Is(err, nats.ErrMsgNotFound) {
		t.Errorf("GetMsg 9999: %v, want ErrMsgNotFound", err)
	}

	// Deletes and purges.
	if err := js.DeleteMsg("LEG", 2); err != nil {
		t.Errorf("DeleteMsg: %v", err)
	}
	if err := js.SecureDeleteMsg("LEG", 3); err != nil {
		t.Errorf("SecureDeleteMsg: %v", err)
	}
	if err := js.PurgeStream("LEG", &nats.StreamPurgeRequest{Subject: "leg.async", Keep: 10}); err != nil {
		t.Errorf("PurgeStream keep: %v", err)
	}
	info, err = js.StreamInfo("LEG", &nats.StreamInfoRequest{DeletedDetails: true, SubjectsFilter: ">"})
	if err != nil {
		t.Fatal(err)
	}
	if st := info.State; st.Msgs != 13 || st.Subjects["leg.async"] != 10 || !slices.Equal(st.Deleted[:2], []uint64{2, 3}) {
		t.Errorf("state after deletes and purge: msgs %d subjects %v deleted %v", st.Msgs, st.Subjects, st.Deleted)
	}

	// Update, list, names.
	cfg.MaxMsgs = 5
	info, err = js.UpdateStream(cfg)
	if err != nil || info.Config.MaxMsgs != 5 || info.State.Msgs != 5 {
		t.Errorf("UpdateStream to max_msgs 5: %+v %v", info, err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "MEM", Subjects: []string{"mem"}, Storage: nats.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range js.StreamNames() {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"LEG", "MEM"}) {
		t.Errorf("StreamNames: %v", names)
	}
	var listed []string
	for si := range js.Streams() {
		listed = append(listed, si.Config.Name)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, names) {
		t.Errorf("Streams: %v", listed)
	}
	var bySubject []string
	for name := range js.StreamNames(nats.StreamListFilter("mem")) {
		bySubject = append(bySubject, name)
	}
	if !slices.Equal(bySubject, []string{"MEM"}) {
		t.Errorf("StreamNames filtered by mem: %v", bySubject)
	}
	if name, err := js.StreamNameBySubject("leg.zzz"); err != nil || name != "LEG" {
		t.Errorf("StreamNameBySubject: %q %v", name, err)
	}
	ai, err = js.AccountInfo()
	if err != nil || ai.Streams != 2 || ai.Store == 0 {
		t.Errorf("AccountInfo with two streams: %+v %v", ai, err)
	}

	if err := js.PurgeStream("LEG"); err != nil {
		t.Errorf("PurgeStream: %v", err)
	}
	if err := js.DeleteStream("LEG"); err != nil {
		t.Errorf("DeleteStream: %v", err)
	}
	if err := js.DeleteStream("LEG"); !errors.Is(err, nats.ErrStreamNotFound) {
		t.Errorf("DeleteStream twice: %v, want ErrStreamNotFound", err)
	}
}
