package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
)

var testConf = raft.Configuration{Servers: []raft.Server{
	{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:1"},
	{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:2"},
	{Suffrage: raft.Nonvoter, ID: "n3#2", Address: "127.0.0.1:3"},
}}

// populate writes streams in partitions 1 and 2, an R1 stream, meta
// catalog records and group 1's applied state; tag makes two stores'
// contents differ.
func populate(h *harness, tag string) {
	h.apply(func(b *Batch) {
		for _, id := range []uint64{1<<48 + 1, 1<<48 + 7, 2<<48 + 1, 5} {
			b.PutStream(StreamMeta{ID: id, Name: tag + fmt.Sprint(id), Config: []byte("{}")})
			b.PutStreamState(id, StreamState{FirstSeq: 1, LastSeq: 3, Msgs: 3})
			for seq := uint64(1); seq <= 3; seq++ {
				b.PutMsg(id, msg(seq, "s."+tag, tag+strings.Repeat("d", int(seq)*100)))
			}
			b.PutConsumer(id, "C"+tag, []byte("cfg"))
			b.PutDedup(id, DedupEntry{ID: tag, Seq: 1, Time: 1})
		}
		b.PutMetaRecord([]byte{'a', byte(len(tag))}, []byte(tag))
		b.PutMetaRecord([]byte("stream/"+tag), []byte("meta of "+tag))
		b.PutAppliedConfig(1, 9, 2, testConf)
		b.PutApplied(1, 12, 3)
		b.PutAppliedConfig(0, 4, 1, testConf)
	})
}

// groupDump is every raw record of the group's ranges.
func groupDump(t testing.TB, s *Store, group uint16) []kv {
	var out []kv
	for _, r := range raftGroupRanges(group) {
		out = append(out, dump(t, s, r.start, r.end)...)
	}
	return out
}

func sameDump(a, b []kv) bool {
	return slices.EqualFunc(a, b, func(x, y kv) bool { return bytes.Equal(x.k, y.k) && bytes.Equal(x.v, y.v) })
}

// openSnapshot reads group's whole snapshot stream.
func openSnapshot(t testing.TB, s *Store, group uint16) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	ss := s.SnapshotStore(group)
	list, err := ss.List()
	must(t, err)
	if len(list) != 1 {
		t.Fatalf("%d snapshots listed", len(list))
	}
	meta, rc, err := ss.Open(list[0].ID)
	must(t, err)
	data, err := io.ReadAll(rc)
	must(t, err)
	must(t, rc.Close())
	if int64(len(data)) != meta.Size {
		t.Fatalf("streamed %d bytes, meta says %d", len(data), meta.Size)
	}
	return meta, data
}

// install feeds data to a sink of s as raft's InstallSnapshot does, in
// uneven writes.
func install(s *Store, group uint16, meta *raft.SnapshotMeta, data []byte) error {
	sink, err := s.SnapshotStore(group).Create(raft.SnapshotVersionMax, meta.Index, meta.Term,
		meta.Configuration, meta.ConfigurationIndex, nil)
	if err != nil {
		return err
	}
	for i, n := 0, 1; i < len(data); i, n = i+n, n*3+1 {
		n = min(n, len(data)-i)
		if _, err := sink.Write(data[i : i+n]); err != nil {
			_ = sink.Cancel()
			return err
		}
	}
	if err := sink.Close(); err != nil {
		return err
	}
	// What raft does next: open the received snapshot for FSM.Restore, on
	// the FSM goroutine.
	got, rc, err := s.SnapshotStore(group).Open(sink.ID())
	if err != nil {
		return err
	}
	if got.Index != meta.Index || got.Size != int64(len(data)) {
		return fmt.Errorf("received snapshot opens as %+v", got)
	}
	back, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if !bytes.Equal(back, data) {
		return fmt.Errorf("received snapshot reads back differently")
	}
	return s.RestoreSnapshot(group, rc)
}

func newEngine(t testing.TB, kind string) *harness {
	for _, e := range engines {
		if e.name == kind {
			return e.open(t)
		}
	}
	t.Fatalf("no engine %q", kind)
	return nil
}

// TestRaftSnapshotRoundTrip streams each group's snapshot from one store
// into another that holds different data: the receiver's group ranges
// become exactly the sender's, everything else stays as it was, and the
// applied state comes along.
func TestRaftSnapshotRoundTrip(t *testing.T) {
	forEachEngine(t, func(t *testing.T, src *harness) {
		populate(src, "src")
		for _, group := range []uint16{1, 0} {
			dst := newEngine(t, src.kind)
			defer dst.close()
			populate(dst, "dst")
			dst.apply(func(b *Batch) { b.PutStream(StreamMeta{ID: 1<<48 + 99, Name: "only-dst"}) })
			before := dump(t, dst.s, nil, nil)

			meta, data := openSnapshot(t, src.s, group)
			want := groupDump(t, src.s, group)
			// The stream is frozen at Open: later writes are not in it.
			src.apply(func(b *Batch) { b.PutMsg(1<<48+1, msg(50, "late", "x")) })
			if group == 1 && (meta.Index != 12 || meta.Term != 3 || meta.ConfigurationIndex != 9) {
				t.Fatalf("meta %+v", meta)
			}
			if !slices.Equal(meta.Configuration.Servers, testConf.Servers) {
				t.Fatalf("configuration %+v", meta.Configuration)
			}
			must(t, install(dst.s, group, meta, data))

			if got := groupDump(t, dst.s, group); !sameDump(got, want) {
				t.Fatalf("group %d ranges: %d records, want %d", group, len(got), len(want))
			}
			inGroup := func(k []byte) bool { return inRanges(raftGroupRanges(group), k) }
			var otherBefore, otherAfter []kv
			for _, r := range before {
				if !inGroup(r.k) && r.k[0] != prefixRaft {
					otherBefore = append(otherBefore, r)
				}
			}
			for _, r := range dump(t, dst.s, nil, nil) {
				if !inGroup(r.k) && r.k[0] != prefixRaft {
					otherAfter = append(otherAfter, r)
				}
			}
			if !sameDump(otherBefore, otherAfter) {
				t.Fatalf("group %d install touched other records: %d before, %d after", group, len(otherBefore), len(otherAfter))
			}
			if i, tm, err := dst.s.Applied(group); err != nil || i != meta.Index || tm != meta.Term {
				t.Fatalf("applied after install %d/%d, %v", i, tm, err)
			}
			if ok, err := dst.s.NeedsRepair(group); err != nil || ok {
				t.Fatalf("NeedsRepair after install %v, %v", ok, err)
			}
			if n := len(dump(t, dst.s, raftKey(nil, group, raftKindStaging), raftKey(nil, group, raftKindStaging+1))); n != 0 {
				t.Fatalf("%d staged chunks left", n)
			}
			// The receiver now streams the same bytes.
			if _, again := openSnapshot(t, dst.s, group); !bytes.Equal(again, data) {
				t.Fatal("the installed state streams differently")
			}
			if dst.reopen() {
				if got := groupDump(t, dst.s, group); len(got) == 0 {
					t.Fatal("installed state lost on reopen")
				}
			}
		}
		// The untouched groups of the sender kept their records.
		if n := len(groupDump(t, src.s, 2)); n == 0 {
			t.Fatal("no partition 2 records")
		}
	})
}

// reseal recomputes a stream's trailer, to build streams that are wrong in
// what they say rather than in their bytes.
func reseal(data []byte) []byte {
	body := data[:len(data)-crcLen]
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
}

// TestRaftSnapshotCorruptRefused: a stream with a flipped bit, cut short,
// with bytes added, or well-formed but wrong, is refused with ErrCorrupt
// and the receiver is left exactly as it was.
func TestRaftSnapshotCorruptRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, src *harness) {
		populate(src, "src")
		meta, data := openSnapshot(t, src.s, 1)
		headerLen := len(appendSnapshotHeader(nil, 1, &appliedState{index: 12, term: 3, confIndex: 9, conf: testConf}))
		variants := map[string][]byte{}
		for _, pos := range []int{0, 5, headerLen - 1, headerLen + 3, len(data) / 2, len(data) - 5, len(data) - 1} {
			d := bytes.Clone(data)
			d[pos] ^= 0x04
			variants[fmt.Sprintf("flip@%d", pos)] = d
		}
		for _, n := range []int{1, 3, headerLen, len(data) / 2, len(data) - 1} {
			variants[fmt.Sprintf("cut@%d", n)] = bytes.Clone(data[:n])
		}
		variants["extra"] = reseal(append(bytes.Clone(data[:len(data)-crcLen]), 0, 0, 0, 0, 0))
		other := bytes.Clone(data)
		binary.BigEndian.PutUint16(other[5:], 2)
		variants["group"] = reseal(other)
		// A record of partition 2 inside partition 1's stream.
		foreign := appendSnapshotHeader(nil, 1, &appliedState{index: 12, term: 3, confIndex: 9, conf: testConf})
		k := catalogKey(nil, 2<<48+1, catalogMeta)
		v := seal(k, []byte("x"), 0)
		foreign = appendBytes(appendBytes(foreign, k), v)
		foreign = append(foreign, 0)
		variants["foreign"] = binary.LittleEndian.AppendUint32(foreign, crc32.Checksum(foreign, castagnoli))
		// A record whose own checksum fails, under a valid trailer.
		badRec := appendSnapshotHeader(nil, 1, &appliedState{index: 12, term: 3, confIndex: 9, conf: testConf})
		k = catalogKey(nil, 1<<48+1, catalogMeta)
		badRec = append(appendBytes(appendBytes(badRec, k), []byte("xxxxxxxx")), 0)
		variants["record"] = binary.LittleEndian.AppendUint32(badRec, crc32.Checksum(badRec, castagnoli))

		for name, d := range variants {
			t.Run(name, func(t *testing.T) {
				dst := newEngine(t, src.kind)
				defer dst.close()
				populate(dst, "dst")
				before := dump(t, dst.s, nil, nil)
				err := install(dst.s, 1, meta, d)
				wantErr(t, err, ErrCorrupt)
				if after := dump(t, dst.s, nil, nil); !sameDump(before, after) {
					t.Fatalf("refused stream changed the store: %d records before, %d after", len(before), len(after))
				}
			})
		}
		// A stream for another {index, term} than raft asked for.
		dst := newEngine(t, src.kind)
		defer dst.close()
		wrong := *meta
		wrong.Index++
		wantErr(t, install(dst.s, 1, &wrong, data), ErrCorrupt)
	})
}

// TestRaftSnapshotInstallCutShort loses power during an install, just
// before its last batch is synced: the repair marker is on disk, so the
// restarted node knows its group is neither the old state nor the new.
func TestRaftSnapshotInstallCutShort(t *testing.T) {
	src := openPebbleHarness(t)
	defer src.close()
	populate(src, "src")
	meta, data := openSnapshot(t, src.s, 1)

	var armed atomic.Bool
	var syncs atomic.Int64
	var crashed atomic.Pointer[vfs.MemFS]
	mem := vfs.NewCrashableMem()
	crashAtSecond := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			// The first sync is the marker's; the second the final batch's.
			if syncs.Add(1) == 2 {
				crashed.Store(mem.CrashClone(vfs.CrashCloneCfg{}))
			}
		}
		return nil
	})
	s := mustOpen(t, errorfs.Wrap(mem, crashAtSecond))
	dst := &harness{t: t, kind: "pebble", s: s}
	populate(dst, "dst")
	armed.Store(true)
	must(t, install(s, 1, meta, data))
	must(t, s.Close())
	if crashed.Load() == nil {
		t.Fatalf("%d syncs during the install", syncs.Load())
	}

	s2 := mustOpen(t, crashed.Load())
	defer s2.Close()
	if ok, err := s2.NeedsRepair(1); err != nil || !ok {
		t.Fatalf("NeedsRepair after a cut-short install: %v, %v", ok, err)
	}
	if ok, _ := s2.HasState(1); !ok {
		t.Fatal("a group in repair has no state")
	}
	if ok, _ := s2.NeedsRepair(2); ok {
		t.Fatal("group 2 marked")
	}
}

// TestRaftSnapshotLocal: a snapshot raft takes itself writes nothing to the
// sink; Close records it as the group's floor, which List reports when it
// is ahead of the applied record (raft counts no-op entries the FSM never
// sees).
func TestRaftSnapshotLocal(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		ss := h.s.SnapshotStore(1)
		if list, err := ss.List(); err != nil || len(list) != 0 {
			t.Fatalf("fresh group lists %v, %v", list, err)
		}
		if _, _, err := ss.Open("store-group-1"); err == nil {
			t.Fatal("opened a snapshot of nothing")
		}
		h.apply(func(b *Batch) { b.PutAppliedConfig(1, 5, 1, testConf) })
		sink, err := ss.Create(raft.SnapshotVersionMax, 7, 2, testConf, 5, nil)
		must(t, err)
		must(t, sink.Close())
		must(t, sink.Close()) // raft closes after Persist did
		list, err := ss.List()
		must(t, err)
		if len(list) != 1 || list[0].Index != 7 || list[0].Term != 2 || list[0].ConfigurationIndex != 5 {
			t.Fatalf("after a local snapshot: %+v", list)
		}
		// The FSM moving on wins over the floor.
		h.apply(func(b *Batch) { b.PutApplied(1, 9, 2) })
		if list, _ := ss.List(); list[0].Index != 9 {
			t.Fatalf("after applying 9: %+v", list[0])
		}
		// An applied index without any configuration is refused: raft would
		// start knowing no members and vote for anyone.
		h.apply(func(b *Batch) { b.PutApplied(3, 9, 2) })
		if _, err := h.s.SnapshotStore(3).List(); err == nil || !strings.Contains(err.Error(), "without a configuration") {
			t.Fatalf("applied without configuration: %v", err)
		}
		// Cancel discards a partial receive.
		sink, err = ss.Create(raft.SnapshotVersionMax, 10, 2, testConf, 5, nil)
		must(t, err)
		_, err = sink.Write(bytes.Repeat([]byte{1}, snapshotChunk+100))
		must(t, err)
		must(t, sink.Cancel())
		if n := len(dump(t, h.s, raftKey(nil, 1, raftKindStaging), raftKey(nil, 1, raftKindStaging+1))); n != 0 {
			t.Fatalf("%d staged chunks after Cancel", n)
		}
	})
}

func TestMetaRecords(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			b.PutMetaRecord([]byte("stream/b"), []byte("2"))
			b.PutMetaRecord([]byte("stream/a"), []byte("1"))
			b.PutMetaRecord([]byte("node/n1"), []byte("up"))
			b.PutMetaRecord([]byte("streamz"), []byte("other"))
		})
		if v, err := h.s.MetaRecord([]byte("node/n1")); err != nil || string(v) != "up" {
			t.Fatalf("get: %q, %v", v, err)
		}
		_, err := h.s.MetaRecord([]byte("node/n2"))
		wantErr(t, err, ErrNotFound)
		var got []string
		must(t, h.s.MetaRecords([]byte("stream/"), func(k, v []byte) error {
			got = append(got, string(k)+"="+string(v))
			return nil
		}))
		if !slices.Equal(got, []string{"stream/a=1", "stream/b=2"}) {
			t.Fatalf("scan: %q", got)
		}
		h.apply(func(b *Batch) { b.DeleteMetaRecord([]byte("stream/a")) })
		_, err = h.s.MetaRecord([]byte("stream/a"))
		wantErr(t, err, ErrNotFound)
		k := metaCatalogKey(nil, []byte("node/n1"))
		v := h.rawGet(k)
		v[0] ^= 1
		h.rawSet(k, v)
		_, err = h.s.MetaRecord([]byte("node/n1"))
		wantErr(t, err, ErrCorrupt)
		wantErr(t, h.s.MetaRecords(nil, func(k, v []byte) error { return nil }), ErrCorrupt)
	})
}

// TestRaftSnapshotWaitsForRestore: a received snapshot changes nothing
// until RestoreSnapshot (the FSM's Restore) installs it, and a Restore
// without one (raft restoring the state in place) changes nothing.
func TestRaftSnapshotWaitsForRestore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, src *harness) {
		populate(src, "src")
		meta, data := openSnapshot(t, src.s, 1)
		dst := newEngine(t, src.kind)
		defer dst.close()
		populate(dst, "dst")
		before := dump(t, dst.s, nil, nil)
		must(t, dst.s.RestoreSnapshot(1, nil))
		sink, err := dst.s.SnapshotStore(1).Create(raft.SnapshotVersionMax, meta.Index, meta.Term, meta.Configuration, meta.ConfigurationIndex, nil)
		must(t, err)
		_, err = sink.Write(data)
		must(t, err)
		must(t, sink.Close())
		var changed []kv
		for _, r := range dump(t, dst.s, nil, nil) {
			if r.k[0] != prefixRaft || r.k[3] != raftKindStaging {
				changed = append(changed, r)
			}
		}
		if !sameDump(before, changed) {
			t.Fatal("a received snapshot changed the store before Restore")
		}
		must(t, dst.s.RestoreSnapshot(1, nil))
		if !sameDump(groupDump(t, dst.s, 1), groupDump(t, src.s, 1)) {
			t.Fatal("Restore did not install the received snapshot")
		}
		// Once installed it is gone: a second Restore changes nothing.
		after := dump(t, dst.s, nil, nil)
		must(t, dst.s.RestoreSnapshot(1, nil))
		if !sameDump(after, dump(t, dst.s, nil, nil)) {
			t.Fatal("a second Restore changed the store")
		}
	})
}

// TestRaftSnapshotReaderClose: a snapshot stream closed early, or never
// read, releases its Pebble snapshot and lets the store close; a read of a
// corrupt record fails the stream instead of sending it.
func TestRaftSnapshotReaderClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		populate(h, "src")
		ss := h.s.SnapshotStore(1)
		_, rc, err := ss.Open("store-group-1")
		must(t, err)
		must(t, rc.Close())
		_, rc, err = ss.Open("store-group-1")
		must(t, err)
		buf := make([]byte, 10)
		_, err = io.ReadFull(rc, buf)
		must(t, err)
		must(t, rc.Close())
		must(t, rc.Close())
		if _, err := rc.Read(buf); err == nil {
			t.Fatal("read after close")
		}
		if _, _, err := ss.Open("store-group-2"); err == nil {
			t.Fatal("opened another group's snapshot id")
		}
		k := msgKey(nil, 1<<48+7, 2)
		v := h.rawGet(k)
		v[len(v)-1] ^= 1
		h.rawSet(k, v)
		_, rc, err = ss.Open("store-group-1")
		must(t, err)
		_, err = io.ReadAll(rc)
		wantErr(t, err, ErrCorrupt)
		must(t, rc.Close())
		must(t, h.s.Close())
		h.s = nil
	})
}
