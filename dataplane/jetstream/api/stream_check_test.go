package api

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func codeOf(err *Error) ErrorCode {
	if err == nil {
		return 0
	}
	return err.ErrCode
}

// streams is a Lookup over a fixed set of configs.
func streams(cfgs ...StreamConfig) func(string) (*StreamConfig, bool) {
	return func(name string) (*StreamConfig, bool) {
		for i := range cfgs {
			if cfgs[i].Name == name {
				return &cfgs[i], true
			}
		}
		return nil, false
	}
}

func TestStreamValidate(t *testing.T) {
	base := func(mod func(*StreamConfig)) StreamConfig {
		c := StreamConfig{Name: "S", Subjects: []string{"s.>"}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	mirror := func(mod func(*StreamSource)) func(*StreamConfig) {
		return func(c *StreamConfig) {
			c.Subjects = nil
			c.Mirror = &StreamSource{Name: "ORIGIN"}
			if mod != nil {
				mod(c.Mirror)
			}
		}
	}
	source := func(srcs ...*StreamSource) func(*StreamConfig) {
		return func(c *StreamConfig) { c.Sources = srcs }
	}
	big := strings.Repeat("x", 256)
	pedanticEnv := StreamEnv{Pedantic: true}
	origin := StreamConfig{Name: "ORIGIN", Subjects: []string{"o.>"}, MaxMsgSize: 1024, AllowDirect: true}
	lookupEnv := StreamEnv{Lookup: streams(origin,
		StreamConfig{Name: "B", Subjects: []string{"b.>"}, Sources: []*StreamSource{{Name: "S"}}})}

	for _, c := range []struct {
		name string
		cfg  StreamConfig
		env  StreamEnv
		code ErrorCode
		desc string // substring of the description, when it matters
	}{
		{"minimal", base(nil), StreamEnv{}, 0, ""},
		{"name only", StreamConfig{Name: "S"}, StreamEnv{}, 0, ""},
		{"empty name", base(func(c *StreamConfig) { c.Name = "" }), StreamEnv{}, 10052, "stream name is required and can not contain '.', '*', '>', '\\', '/'"},
		{"dot", base(func(c *StreamConfig) { c.Name = "a.b" }), StreamEnv{}, 10052, "stream name is required"},
		{"star", base(func(c *StreamConfig) { c.Name = "a*" }), StreamEnv{}, 10052, "stream name is required"},
		{"gt", base(func(c *StreamConfig) { c.Name = "a>" }), StreamEnv{}, 10052, "stream name is required"},
		{"space", base(func(c *StreamConfig) { c.Name = "a b" }), StreamEnv{}, 10052, "stream name is required"},
		{"slash", base(func(c *StreamConfig) { c.Name = "a/b" }), StreamEnv{}, 10052, "stream name is required"},
		{"backslash", base(func(c *StreamConfig) { c.Name = `a\b` }), StreamEnv{}, 10052, "stream name is required"},
		{"long name", base(func(c *StreamConfig) { c.Name = big }), StreamEnv{}, 10052, "stream name is too long, maximum allowed is 255"},
		{"long description", base(func(c *StreamConfig) { c.Description = strings.Repeat("d", 4097) }), StreamEnv{}, 10052, "stream description is too long, maximum allowed is 4096"},
		{"big metadata", base(func(c *StreamConfig) { c.Metadata = map[string]string{"k": strings.Repeat("v", 128*1024)} }), StreamEnv{}, 10052, "stream metadata exceeds maximum size of 131072 bytes"},
		{"replicas 6", base(func(c *StreamConfig) { c.Replicas = 6 }), StreamEnv{}, 10052, "maximum replicas is 5"},
		{"replicas -1", base(func(c *StreamConfig) { c.Replicas = -1 }), StreamEnv{}, 10133, "replicas count cannot be negative"},
		{"max_msgs -5", base(func(c *StreamConfig) { c.MaxMsgs = -5 }), StreamEnv{}, 0, ""},
		{"pedantic max_msgs -5", base(func(c *StreamConfig) { c.MaxMsgs = -5 }), pedanticEnv, 10157, "pedantic mode: max_msgs must be set to -1"},
		{"pedantic max_consumers -2", base(func(c *StreamConfig) { c.MaxConsumers = -2 }), pedanticEnv, 10157, "max_consumers must be set to -1"},
		{"negative max_age", base(func(c *StreamConfig) { c.MaxAge = -1 }), StreamEnv{}, 10052, "max age can not be negative"},
		{"tiny max_age", base(func(c *StreamConfig) { c.MaxAge = 50 * time.Millisecond }), StreamEnv{}, 10052, "max age needs to be >= 100ms"},
		{"negative dups", base(func(c *StreamConfig) { c.Duplicates = -1 }), StreamEnv{}, 10052, "duplicates window can not be negative"},
		{"dups over max_age", base(func(c *StreamConfig) { c.MaxAge = time.Hour; c.Duplicates = 2 * time.Hour }), StreamEnv{}, 10052, "duplicates window can not be larger then max age"},
		{"tiny dups", base(func(c *StreamConfig) { c.Duplicates = 50 * time.Millisecond }), StreamEnv{}, 10052, "duplicates window needs to be >= 100ms"},
		{"pedantic short max_age", base(func(c *StreamConfig) { c.MaxAge = time.Minute }), pedanticEnv, 10157, "duplicate window cannot be bigger than max age"},
		{"rollup without purge", base(func(c *StreamConfig) { c.DenyPurge, c.AllowRollup = true, true }), StreamEnv{}, 10052, "roll-ups require the purge permission"},
		{"counter discard new", base(func(c *StreamConfig) { c.AllowMsgCounter, c.Discard = true, DiscardNew }), StreamEnv{}, 10052, "counter stream cannot use discard new"},
		{"counter ttl", base(func(c *StreamConfig) { c.AllowMsgCounter, c.AllowMsgTTL = true, true }), StreamEnv{}, 10052, "counter stream cannot use message TTLs"},
		{"counter schedules", base(func(c *StreamConfig) { c.AllowMsgCounter, c.AllowMsgSchedules = true, true }), StreamEnv{}, 10052, "counter stream cannot use message schedules"},
		{"counter interest", base(func(c *StreamConfig) { c.AllowMsgCounter, c.Retention = true, InterestPolicy }), StreamEnv{}, 10052, "counter stream can only use limits retention"},
		// nats-server checks counters before delete markers turn TTLs on.
		{"counter with markers", base(func(c *StreamConfig) { c.AllowMsgCounter, c.SubjectDeleteMarkerTTL = true, time.Minute }), StreamEnv{}, 0, ""},
		{"discard new per, old", base(func(c *StreamConfig) { c.DiscardNewPer, c.MaxMsgsPer = true, 1 }), StreamEnv{}, 10052, "discard new per subject requires discard new policy to be set"},
		{"discard new per, no limit", base(func(c *StreamConfig) { c.DiscardNewPer, c.Discard = true, DiscardNew }), StreamEnv{}, 10052, "discard new per subject requires max msgs per subject > 0"},
		{"tiny marker ttl", base(func(c *StreamConfig) { c.SubjectDeleteMarkerTTL = time.Millisecond * 500 }), StreamEnv{}, 10052, "subject delete marker TTL must be at least 1 second"},
		{"negative marker ttl", base(func(c *StreamConfig) { c.SubjectDeleteMarkerTTL = -1 }), StreamEnv{}, 10052, "subject delete marker TTL must not be negative"},
		{"pedantic markers no ttl", base(func(c *StreamConfig) { c.SubjectDeleteMarkerTTL = time.Minute }), pedanticEnv, 10052, "subject delete marker cannot be set if message TTLs are disabled"},
		{"pedantic markers no rollup", base(func(c *StreamConfig) { c.SubjectDeleteMarkerTTL, c.AllowMsgTTL = time.Minute, true }), pedanticEnv, 10052, "subject delete marker cannot be set if roll-ups are disabled"},
		{"schedules discard new", base(func(c *StreamConfig) { c.AllowMsgSchedules, c.Discard = true, DiscardNew }), StreamEnv{}, 10052, "message scheduling cannot use discard new"},
		{"async memory", base(func(c *StreamConfig) { c.PersistMode, c.Storage = AsyncPersistMode, MemoryStorage }), StreamEnv{}, 10052, "async persist mode is only supported on file storage"},
		{"async R3", base(func(c *StreamConfig) { c.PersistMode, c.Replicas = AsyncPersistMode, 3 }), StreamEnv{}, 10052, "async persist mode is not supported on replicated streams"},
		{"async atomic", base(func(c *StreamConfig) { c.PersistMode, c.AllowAtomicPublish = AsyncPersistMode, true }), StreamEnv{}, 10052, "async persist mode is not supported with atomic batch publish"},
		{"mirror", base(mirror(nil)), StreamEnv{}, 0, ""},
		{"mirror first seq", base(func(c *StreamConfig) { mirror(nil)(c); c.FirstSeq = 5 }), StreamEnv{}, 10143, ""},
		{"mirror subjects", base(func(c *StreamConfig) { mirror(nil)(c); c.Subjects = []string{"x"} }), StreamEnv{}, 10034, "stream mirrors can not contain subjects"},
		{"mirror sources", base(func(c *StreamConfig) { mirror(nil)(c); c.Sources = []*StreamSource{{Name: "X"}} }), StreamEnv{}, 10031, ""},
		{"mirror counter", base(func(c *StreamConfig) { mirror(nil)(c); c.AllowMsgCounter = true }), StreamEnv{}, 10173, ""},
		{"mirror atomic", base(func(c *StreamConfig) { mirror(nil)(c); c.AllowAtomicPublish = true }), StreamEnv{}, 10198, ""},
		{"mirror schedules", base(func(c *StreamConfig) { mirror(nil)(c); c.AllowMsgSchedules = true }), StreamEnv{}, 10186, ""},
		{"mirror bad name", base(mirror(func(m *StreamSource) { m.Name = "a.b" })), StreamEnv{}, 10142, ""},
		{"mirror filter and transforms", base(mirror(func(m *StreamSource) {
			m.FilterSubject = "a"
			m.SubjectTransforms = []SubjectTransform{{Source: "b"}}
		})), StreamEnv{}, 10150, ""},
		{"mirror bad transform source", base(mirror(func(m *StreamSource) { m.SubjectTransforms = []SubjectTransform{{Source: "a..b"}} })), StreamEnv{}, 10151, "mirror transform source: invalid subject a..b"},
		{"mirror bad transform dest", base(mirror(func(m *StreamSource) {
			m.SubjectTransforms = []SubjectTransform{{Source: "a.*", Destination: "b.{{wildcard(2)}}"}}
		})), StreamEnv{}, 10154, ""},
		{"mirror overlapping transforms", base(mirror(func(m *StreamSource) {
			m.SubjectTransforms = []SubjectTransform{{Source: "a.*"}, {Source: "a.b"}}
		})), StreamEnv{}, 10152, ""},
		{"mirror durable bad deliver", base(mirror(func(m *StreamSource) { m.Consumer = &StreamSourceDurable{Name: "d", DeliverSubject: "x.*"} })), StreamEnv{}, 10213, ""},
		{"mirror markers", base(func(c *StreamConfig) { mirror(nil)(c); c.SubjectDeleteMarkerTTL = time.Minute }), StreamEnv{}, 10052, "subject delete markers forbidden on mirrors"},
		{"mirror smaller max msg size", base(func(c *StreamConfig) { mirror(nil)(c); c.MaxMsgSize = 10 }), lookupEnv, 10030, ""},
		{"pedantic mirror direct", base(mirror(nil)), StreamEnv{Pedantic: true, Lookup: lookupEnv.Lookup}, 10157, "origin stream has direct get set, mirror has it disabled"},
		{"source bad name", base(source(&StreamSource{Name: ""})), StreamEnv{}, 10141, ""},
		{"source nil", base(source(nil)), StreamEnv{}, 10141, ""},
		{"source duplicate", base(source(&StreamSource{Name: "A"}, &StreamSource{Name: "A"})), StreamEnv{}, 10140, ""},
		{"source distinct filters", base(source(&StreamSource{Name: "A", FilterSubject: "x"}, &StreamSource{Name: "A", FilterSubject: "y"})), StreamEnv{}, 0, ""},
		{"source filter and transforms", base(source(&StreamSource{Name: "A", FilterSubject: "x", SubjectTransforms: []SubjectTransform{{Source: "y"}}})), StreamEnv{}, 10144, ""},
		{"source bad transform source", base(source(&StreamSource{Name: "A", SubjectTransforms: []SubjectTransform{{Source: "a b"}}})), StreamEnv{}, 10145, ""},
		{"source bad transform dest", base(source(&StreamSource{Name: "A", SubjectTransforms: []SubjectTransform{{Source: "a", Destination: "b.>"}}})), StreamEnv{}, 10146, ""},
		{"source overlapping transforms", base(source(&StreamSource{Name: "A", SubjectTransforms: []SubjectTransform{{Source: "a.>"}, {Source: "a.b"}}})), StreamEnv{}, 10147, ""},
		{"source durable twice", base(source(
			&StreamSource{Name: "A", FilterSubject: "", Consumer: &StreamSourceDurable{Name: "d", DeliverSubject: "x"}, SubjectTransforms: []SubjectTransform{{Source: "a"}}},
			&StreamSource{Name: "A", Consumer: &StreamSourceDurable{Name: "d", DeliverSubject: "y"}, SubjectTransforms: []SubjectTransform{{Source: "b"}}})), StreamEnv{}, 10216, ""},
		{"source with schedules", base(func(c *StreamConfig) { source(&StreamSource{Name: "A"})(c); c.AllowMsgSchedules = true }), StreamEnv{}, 10187, ""},
		{"source smaller max msg size", base(func(c *StreamConfig) { source(&StreamSource{Name: "ORIGIN"})(c); c.MaxMsgSize = 10 }), lookupEnv, 10046, ""},
		{"external wildcard deliver", base(source(&StreamSource{Name: "A", External: &ExternalStream{APIPrefix: "$JS.x.API", DeliverPrefix: "d.*"}})), StreamEnv{}, 10024, "stream external delivery prefix d.* must not contain wildcards"},
		{"external api overlap", base(source(&StreamSource{Name: "A", External: &ExternalStream{APIPrefix: "$JS.API"}})), StreamEnv{}, 10021, "stream external api prefix $JS.API must not overlap with $JS.API"},
		{"external api wildcard", base(source(&StreamSource{Name: "A", External: &ExternalStream{APIPrefix: "x.*"}})), StreamEnv{}, 10052, `stream external api prefix "x.*" must be a valid subject without wildcards`},
		{"cycle", StreamConfig{Name: "S", Subjects: []string{"s"}, Sources: []*StreamSource{{Name: "B"}}}, lookupEnv, 10052, "detected cycle"},
		{"bad subject", base(func(c *StreamConfig) { c.Subjects = []string{"a..b"} }), StreamEnv{}, 10052, "invalid subject"},
		// The overlap check meets an exact duplicate first, as in nats-server.
		{"duplicate subject", base(func(c *StreamConfig) { c.Subjects = []string{"a", "a"} }), StreamEnv{}, 10052, `subject "a" overlaps with "a"`},
		{"everything", base(func(c *StreamConfig) { c.Subjects = []string{">"} }), StreamEnv{}, 10052, "capturing all subjects requires no-ack to be true"},
		{"everything R3", base(func(c *StreamConfig) { c.Subjects, c.NoAck, c.Replicas = []string{">"}, true, 3 }), StreamEnv{}, 10052, "capturing all subjects requires replicas of 1"},
		{"everything no-ack", base(func(c *StreamConfig) { c.Subjects, c.NoAck = []string{">"}, true }), StreamEnv{}, 0, ""},
		{"js api", base(func(c *StreamConfig) { c.Subjects = []string{"$JS.API.>"} }), StreamEnv{}, 10052, "subjects that overlap with jetstream api require no-ack to be true"},
		{"js events", base(func(c *StreamConfig) { c.Subjects = []string{"$JS.EVENT.>"} }), StreamEnv{}, 0, ""},
		{"sys", base(func(c *StreamConfig) { c.Subjects = []string{"$SYS.>"} }), StreamEnv{}, 10052, "subjects that overlap with system api require no-ack to be true"},
		{"sys account", base(func(c *StreamConfig) { c.Subjects = []string{"$SYS.ACCOUNT.>"} }), StreamEnv{}, 0, ""},
		{"self overlap", base(func(c *StreamConfig) { c.Subjects = []string{"a.*", "a.b"} }), StreamEnv{}, 10052, `subject "a.*" overlaps with "a.b"`},
		{"max bytes required", base(nil), StreamEnv{Limits: &AccountLimits{MaxBytesRequired: true}}, 10113, ""},
		{"max bytes over stream limit", base(func(c *StreamConfig) { c.MaxBytes = 2048 }), StreamEnv{Limits: &AccountLimits{StoreMaxStreamBytes: 1024}}, 10122, ""},
		{"memory max bytes", base(func(c *StreamConfig) { c.MaxBytes, c.Storage = 2048, MemoryStorage }), StreamEnv{Limits: &AccountLimits{StoreMaxStreamBytes: 1024}}, 0, ""},
		{"transform bad source", base(func(c *StreamConfig) { c.SubjectTransform = &SubjectTransform{Source: "a..", Destination: "b"} }), StreamEnv{}, 10155, ""},
		{"transform bad dest", base(func(c *StreamConfig) { c.SubjectTransform = &SubjectTransform{Source: "a.*", Destination: "b.$2"} }), StreamEnv{}, 10156, ""},
		{"transform ok", base(func(c *StreamConfig) {
			c.SubjectTransform = &SubjectTransform{Source: "s.*.>", Destination: "t.{{wildcard(1)}}.{{partition(3,1)}}.>"}
		}), StreamEnv{}, 0, ""},
		{"republish cycle", base(func(c *StreamConfig) { c.RePublish = &RePublish{Destination: "s.x.>"} }), StreamEnv{}, 10052, "stream configuration for republish destination forms a cycle"},
		{"republish invalid", base(func(c *StreamConfig) { c.RePublish = &RePublish{Source: "s.>", Destination: "r"} }), StreamEnv{}, 10052, "stream configuration for republish with transform from 's.>' to 'r' not valid"},
		{"pedantic republish", base(func(c *StreamConfig) { c.RePublish = &RePublish{Destination: "r.>"} }), pedanticEnv, 10157, "republish source can not be empty"},
		{"preferred placement", base(func(c *StreamConfig) { c.Placement = &Placement{Preferred: "n1"} }), StreamEnv{}, 10052, "preferred server not permitted in placement"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.cfg.Clone()
			out, err := c.cfg.Normalize(c.env)
			if codeOf(err) != c.code {
				t.Fatalf("got %v, want err_code %d", err, c.code)
			}
			if err != nil && !strings.Contains(err.Description, c.desc) {
				t.Fatalf("description %q lacks %q", err.Description, c.desc)
			}
			if err == nil && out == nil {
				t.Fatal("no config and no error")
			}
			if !reflect.DeepEqual(before, &c.cfg) {
				t.Fatal("Normalize changed its receiver")
			}
			if c.env.Lookup == nil && !c.env.Pedantic && c.env.Limits == nil && codeOf(c.cfg.Validate()) != c.code {
				t.Fatal("Validate disagrees with Normalize")
			}
		})
	}
}

func TestStreamDefaults(t *testing.T) {
	c := StreamConfig{Name: "KV_b", Placement: &Placement{}}
	c.Defaults()
	want := StreamConfig{Name: "KV_b", Subjects: []string{"KV_b"}, MaxConsumers: -1, MaxMsgs: -1, MaxBytes: -1,
		MaxMsgsPer: -1, MaxMsgSize: -1, Replicas: 1, Duplicates: 2 * time.Minute}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}

	short := StreamConfig{Name: "S", MaxAge: time.Minute}
	short.Defaults()
	if short.Duplicates != time.Minute {
		t.Errorf("duplicate window should shrink to max_age, got %v", short.Duplicates)
	}
	m := StreamConfig{Name: "M", Mirror: &StreamSource{Name: "O"}}
	m.Defaults()
	if m.Duplicates != 0 || m.Subjects != nil {
		t.Errorf("mirrors keep no window and no subjects: %+v", m)
	}
	markers := StreamConfig{Name: "S", SubjectDeleteMarkerTTL: 5 * time.Second, DenyPurge: true}
	markers.Defaults()
	if !markers.AllowMsgTTL || !markers.AllowRollup || markers.DenyPurge {
		t.Errorf("delete markers imply TTLs and rollups: %+v", markers)
	}
	sched := StreamConfig{Name: "S", AllowMsgSchedules: true}
	sched.Defaults()
	if !sched.AllowRollup {
		t.Error("schedules imply rollups")
	}
	rp := StreamConfig{Name: "S", Subjects: []string{"in.>"}, SubjectTransform: &SubjectTransform{Source: "in.>", Destination: "out.>"},
		RePublish: &RePublish{Destination: ">"}}
	rp.Defaults()
	if rp.RePublish.Source != "out.>" || rp.RePublish.Destination != "out.>" {
		t.Errorf("implicit republish: %+v", rp.RePublish)
	}
}

// TestNormalizeMatchesDefaults: for valid configs, Normalize's result is
// what Defaults gives, and defaulting again changes nothing.
func TestNormalizeMatchesDefaults(t *testing.T) {
	for _, c := range []StreamConfig{
		{Name: "A"},
		{Name: "B", Subjects: []string{"b.>"}, MaxAge: time.Minute, Storage: MemoryStorage, Replicas: 3},
		{Name: "C", Mirror: &StreamSource{Name: "A"}, Placement: &Placement{}},
		{Name: "D", SubjectDeleteMarkerTTL: time.Minute, RePublish: &RePublish{Destination: "r.>"}},
		sampleStreamConfig(t),
	} {
		out, err := c.Normalize(StreamEnv{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		d := *c.Clone()
		d.Defaults()
		if !reflect.DeepEqual(*out, d) {
			t.Errorf("%s:\nnormalize %+v\ndefaults  %+v", c.Name, *out, d)
		}
		if _, err := out.Normalize(StreamEnv{}); err != nil {
			t.Errorf("%s: a normalized config must stay valid: %v", c.Name, err)
		}
		again := *out.Clone()
		again.Defaults()
		if !reflect.DeepEqual(again, *out) {
			t.Errorf("%s: Defaults not idempotent", c.Name)
		}
	}
}

func TestMirrorInheritsDirect(t *testing.T) {
	env := StreamEnv{Lookup: streams(StreamConfig{Name: "O", Subjects: []string{"o"}, AllowDirect: true})}
	out, err := (&StreamConfig{Name: "M", Mirror: &StreamSource{Name: "O"}}).Normalize(env)
	if err != nil || !out.MirrorDirect {
		t.Fatalf("mirror_direct should follow the origin's allow_direct: %+v %v", out, err)
	}
}

func TestCheckStreamUpdate(t *testing.T) {
	old := StreamConfig{Name: "S", Subjects: []string{"s"}, DenyDelete: true, AllowMsgTTL: true,
		Mirror: nil, Retention: LimitsPolicy}
	old.Defaults()
	for _, c := range []struct {
		name string
		mod  func(*StreamConfig)
		code ErrorCode
		desc string
	}{
		{"same", func(*StreamConfig) {}, 0, ""},
		{"rename", func(c *StreamConfig) { c.Name = "T" }, 10052, "stream configuration name must match original"},
		{"storage", func(c *StreamConfig) { c.Storage = MemoryStorage }, 10052, "can not change storage type"},
		{"to workqueue", func(c *StreamConfig) { c.Retention = WorkQueuePolicy }, 10052, "can not change retention policy to/from workqueue"},
		{"to interest", func(c *StreamConfig) { c.Retention = InterestPolicy }, 0, ""},
		{"undeny delete", func(c *StreamConfig) { c.DenyDelete = false }, 10052, "can not cancel deny message deletes"},
		{"add mirror", func(c *StreamConfig) { c.Mirror = &StreamSource{Name: "X"} }, 10055, ""},
		{"ttl off", func(c *StreamConfig) { c.AllowMsgTTL = false }, 10052, "message TTL status can not be disabled"},
		{"counter on", func(c *StreamConfig) { c.AllowMsgCounter = true }, 10052, "can not change message counter setting"},
		{"persist", func(c *StreamConfig) { c.PersistMode = AsyncPersistMode }, 10052, "can not change persist mode"},
	} {
		next := *old.Clone()
		c.mod(&next)
		_, err := CheckStreamUpdate(&old, &next)
		if codeOf(err) != c.code || (err != nil && !strings.Contains(err.Description, c.desc)) {
			t.Errorf("%s: got %v, want %d %q", c.name, err, c.code, c.desc)
		}
	}
	sealed := *old.Clone()
	sealed.Sealed, sealed.MaxAge, sealed.AllowRollup = true, time.Hour, true
	out, err := CheckStreamUpdate(&old, &sealed)
	if err != nil || out.MaxAge != 0 || out.Discard != DiscardNew || !out.DenyPurge || out.AllowRollup {
		t.Errorf("sealing must freeze the stream: %+v %v", out, err)
	}
	if _, err := CheckStreamUpdate(out, &old); codeOf(err) != 10052 {
		t.Errorf("unsealing: %v", err)
	}
}

func TestNamesAndMetadata(t *testing.T) {
	if !ValidName("ORDERS-1_x") || ValidName("") || ValidName("a\tb") || ValidName("a.b") {
		t.Error("ValidName")
	}
	if !HasPathSeparator(`a\b`) || !HasPathSeparator("a/b") || HasPathSeparator("ab") {
		t.Error("HasPathSeparator")
	}
	c := StreamConfig{Name: "S", AllowMsgCounter: true, Metadata: map[string]string{MetaServerVersion: "x", "k": "v"}}
	c.StampRequiredLevel()
	if c.Metadata[MetaRequiredLevel] != "2" || c.Metadata[MetaServerVersion] != "" || c.Metadata["k"] != "v" {
		t.Errorf("stamp: %v", c.Metadata)
	}
	r := c.WithServerMetadata("2.12.0", 2)
	if r.Metadata[MetaServerVersion] != "2.12.0" || r.Metadata[MetaServerLevel] != "2" || c.Metadata[MetaServerLevel] != "" {
		t.Errorf("reply metadata: %v / %v", r.Metadata, c.Metadata)
	}
	if (&StreamConfig{AllowBatchPublish: true}).RequiredAPILevel() != 4 || (&StreamConfig{AllowMsgTTL: true}).RequiredAPILevel() != 1 {
		t.Error("stream levels")
	}
	if (&ConsumerConfig{AckPolicy: AckFlowControl}).RequiredAPILevel() != 4 || (&ConsumerConfig{PriorityGroups: []string{"g"}}).RequiredAPILevel() != 1 {
		t.Error("consumer levels")
	}
}
