package api

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func normalizedStream(t *testing.T, c StreamConfig) *StreamConfig {
	t.Helper()
	out, err := c.Normalize(StreamEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConsumerValidate(t *testing.T) {
	plain := normalizedStream(t, StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	wq := normalizedStream(t, StreamConfig{Name: "W", Subjects: []string{"w.>"}, Retention: WorkQueuePolicy})
	interestR3 := normalizedStream(t, StreamConfig{Name: "I", Subjects: []string{"i.>"}, Retention: InterestPolicy, Replicas: 3})
	limited := normalizedStream(t, StreamConfig{Name: "L", Subjects: []string{"l.>"},
		ConsumerLimits: StreamConsumerLimits{MaxAckPending: 100, InactiveThreshold: time.Minute}})
	env := ConsumerEnv{Stream: plain}
	push := func(mod func(*ConsumerConfig)) ConsumerConfig {
		c := ConsumerConfig{Durable: "D", DeliverSubject: "deliver.d"}
		mod(&c)
		return c
	}
	pull := func(mod func(*ConsumerConfig)) ConsumerConfig {
		c := ConsumerConfig{Durable: "P", AckPolicy: AckExplicit}
		mod(&c)
		return c
	}
	none := func(*ConsumerConfig) {}

	for _, c := range []struct {
		name string
		cfg  ConsumerConfig
		env  ConsumerEnv
		code ErrorCode
		desc string
	}{
		{"pull", pull(none), env, 0, ""},
		{"push", push(none), env, 0, ""},
		{"ephemeral", ConsumerConfig{}, env, 0, ""},
		{"bad name", pull(func(c *ConsumerConfig) { c.Durable, c.Name = "", "a.b" }), env, 10052, `consumer name can not contain '.', '*', '>', '\', '/'`},
		{"bad durable", pull(func(c *ConsumerConfig) { c.Durable = "a b" }), env, 10052, "consumer durable name can not contain"},
		{"long durable", pull(func(c *ConsumerConfig) { c.Durable = strings.Repeat("d", 256) }), env, 10102, "consumer name is too long, maximum allowed is 255"},
		{"replicas over stream", pull(func(c *ConsumerConfig) { c.Replicas = 3 }), env, 10126, ""},
		{"negative replicas", pull(func(c *ConsumerConfig) { c.Replicas = -1 }), env, 10133, ""},
		{"interest replicas", pull(func(c *ConsumerConfig) { c.Replicas = 1 }), ConsumerEnv{Stream: interestR3}, 10134, ""},
		{"negative backoff", pull(func(c *ConsumerConfig) { c.BackOff = []time.Duration{-1} }), env, 10184, ""},
		{"negative ack wait", pull(func(c *ConsumerConfig) { c.AckWait = -1 }), env, 10183, ""},
		{"fc ack on pull", pull(func(c *ConsumerConfig) { c.AckPolicy = AckFlowControl }), env, 10218, ""},
		{"fc ack push", push(func(c *ConsumerConfig) { c.AckPolicy = AckFlowControl }), env, 0, ""},
		{"fc ack pedantic", push(func(c *ConsumerConfig) { c.AckPolicy = AckFlowControl }), ConsumerEnv{Stream: plain, Pedantic: true}, 10219, ""},
		{"fc ack heartbeat", push(func(c *ConsumerConfig) { c.AckPolicy, c.FlowControl, c.Heartbeat = AckFlowControl, true, 2*time.Second }), ConsumerEnv{Stream: plain, Pedantic: true}, 10052, "flow control ack policy heartbeat needs to be 1s"},
		{"fc ack wait", push(func(c *ConsumerConfig) { c.AckPolicy, c.AckWait = AckFlowControl, time.Second }), env, 10221, ""},
		{"fc ack max deliver", push(func(c *ConsumerConfig) { c.AckPolicy, c.MaxDeliver = AckFlowControl, 3 }), env, 10222, ""},
		{"backoff over max deliver", pull(func(c *ConsumerConfig) { c.BackOff, c.MaxDeliver = []time.Duration{1, 2, 3}, 2 }), env, 10116, ""},
		{"long description", pull(func(c *ConsumerConfig) { c.Description = strings.Repeat("d", 4097) }), env, 10107, "consumer description is too long, maximum allowed is 4096"},
		{"wildcard deliver", push(func(c *ConsumerConfig) { c.DeliverSubject = "d.*" }), env, 10079, ""},
		{"invalid deliver", push(func(c *ConsumerConfig) { c.DeliverSubject = "d..x" }), env, 10112, ""},
		{"deliver cycle", push(func(c *ConsumerConfig) { c.DeliverSubject = "s.x" }), env, 10081, ""},
		{"push max waiting", push(func(c *ConsumerConfig) { c.MaxWaiting = 5 }), env, 10080, ""},
		{"push max ack pending without acks", push(func(c *ConsumerConfig) { c.MaxAckPending = 5 }), env, 10082, ""},
		{"small heartbeat", push(func(c *ConsumerConfig) { c.Heartbeat = 50 * time.Millisecond }), env, 10083, ""},
		{"pull ack none on wq", pull(func(c *ConsumerConfig) { c.AckPolicy = AckNone }), ConsumerEnv{Stream: wq}, 10084, ""},
		{"pull rate limit", pull(func(c *ConsumerConfig) { c.RateLimit = 1 }), env, 10086, ""},
		{"pull heartbeat", pull(func(c *ConsumerConfig) { c.Heartbeat = time.Second }), env, 10088, ""},
		{"pull flow control", pull(func(c *ConsumerConfig) { c.FlowControl = true }), env, 10089, ""},
		{"pull tiny max expires", pull(func(c *ConsumerConfig) { c.MaxRequestExpires = time.Microsecond }), env, 10115, ""},
		{"negative max waiting", pull(func(c *ConsumerConfig) { c.MaxWaiting = -1 }), env, 0, ""},
		{"pedantic negative max waiting", pull(func(c *ConsumerConfig) { c.MaxWaiting = -1 }), ConsumerEnv{Stream: plain, Pedantic: true}, 10157, "pedantic mode: max_waiting must not be negative"},
		{"pedantic backoff", pull(func(c *ConsumerConfig) { c.BackOff = []time.Duration{time.Second} }), ConsumerEnv{Stream: plain, Pedantic: true}, 10157, "first backoff value has to equal batch AckWait"},
		{"account max ack pending", pull(func(c *ConsumerConfig) { c.MaxAckPending = 500 }), ConsumerEnv{Stream: plain, Limits: &AccountLimits{MaxAckPending: 100}}, 10121, "consumer max ack pending exceeds system limit of 100"},
		{"stream max ack pending", pull(func(c *ConsumerConfig) { c.MaxAckPending = 500 }), ConsumerEnv{Stream: limited}, 10121, "limit of 100"},
		{"stream inactive threshold", pull(func(c *ConsumerConfig) { c.InactiveThreshold = 2 * time.Minute }), ConsumerEnv{Stream: limited}, 10153, "consumer inactive threshold exceeds system limit of 1m0s"},
		{"direct pull", ConsumerConfig{Direct: true}, env, 10090, ""},
		{"direct durable", push(func(c *ConsumerConfig) { c.Direct = true }), env, 10091, ""},
		{"both filters", pull(func(c *ConsumerConfig) { c.FilterSubject, c.FilterSubjects = "s.a", []string{"s.b"} }), env, 10136, ""},
		{"bad filter", pull(func(c *ConsumerConfig) { c.FilterSubject = "s..a" }), env, 10052, "invalid subject"},
		{"empty filter", pull(func(c *ConsumerConfig) { c.FilterSubjects = []string{"s.a", ""} }), env, 10139, ""},
		{"overlapping filters", pull(func(c *ConsumerConfig) { c.FilterSubjects = []string{"s.*", "s.a"} }), env, 10138, ""},
		{"all with start seq", pull(func(c *ConsumerConfig) { c.OptStartSeq = 4 }), env, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set"},
		{"new with start time", pull(func(c *ConsumerConfig) { c.DeliverPolicy, c.OptStartTime = DeliverNew, ptr(sampleTime) }), env, 10094, "deliver new, but optional start time is also set"},
		{"by seq without seq", pull(func(c *ConsumerConfig) { c.DeliverPolicy = DeliverByStartSequence }), env, 10094, "deliver by start sequence, but optional start sequence is not set"},
		{"by time with seq", pull(func(c *ConsumerConfig) {
			c.DeliverPolicy, c.OptStartTime, c.OptStartSeq = DeliverByStartTime, ptr(sampleTime), 3
		}), env, 10094, "deliver by start time, but optional start start sequence is also set"},
		{"last per subject unfiltered", pull(func(c *ConsumerConfig) { c.DeliverPolicy = DeliverLastPerSubject }), env, 10094, "deliver last per subject, but optional filter subject is not set"},
		{"bad sampling", pull(func(c *ConsumerConfig) { c.SampleFrequency = "often" }), env, 10095, `failed to parse consumer sampling configuration: strconv.Atoi: parsing "often": invalid syntax`},
		{"negative sampling", pull(func(c *ConsumerConfig) { c.SampleFrequency = "-5%" }), env, 10095, "configuration: <nil>"},
		{"fc without heartbeat", push(func(c *ConsumerConfig) { c.FlowControl = true }), env, 10108, ""},
		{"durable and name differ", pull(func(c *ConsumerConfig) { c.Name = "other" }), env, 10132, ""},
		{"big metadata", pull(func(c *ConsumerConfig) { c.Metadata = map[string]string{"k": strings.Repeat("v", 128*1024)} }), env, 10135, "consumer metadata exceeds maximum size of 128KB"},
		{"priority on push", push(func(c *ConsumerConfig) { c.PriorityPolicy, c.PriorityGroups = PriorityOverflow, []string{"g"} }), env, 10178, ""},
		{"policy without groups", pull(func(c *ConsumerConfig) { c.PriorityPolicy = PriorityOverflow }), env, 10159, ""},
		{"empty group", pull(func(c *ConsumerConfig) { c.PriorityPolicy, c.PriorityGroups = PriorityOverflow, []string{""} }), env, 10161, ""},
		{"bad group", pull(func(c *ConsumerConfig) {
			c.PriorityPolicy, c.PriorityGroups = PriorityOverflow, []string{"way-too-long-group-name"}
		}), env, 10162, ""},
		{"groups without policy", pull(func(c *ConsumerConfig) { c.PriorityGroups = []string{"g"} }), env, 10196, ""},
		{"pinned ttl without policy", pull(func(c *ConsumerConfig) { c.PinnedTTL = time.Second }), env, 10197, ""},
		{"no stream", pull(none), ConsumerEnv{}, 10096, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.cfg.Clone()
			_, err := c.cfg.Normalize(c.env)
			if codeOf(err) != c.code {
				t.Fatalf("got %v, want err_code %d", err, c.code)
			}
			if err != nil && !strings.Contains(err.Description, c.desc) {
				t.Fatalf("description %q lacks %q", err.Description, c.desc)
			}
			if !reflect.DeepEqual(before, &c.cfg) {
				t.Fatal("Normalize changed its receiver")
			}
		})
	}
}

func TestConsumerDefaults(t *testing.T) {
	plain := normalizedStream(t, StreamConfig{Name: "S"})
	limited := normalizedStream(t, StreamConfig{Name: "L",
		ConsumerLimits: StreamConsumerLimits{MaxAckPending: 100, InactiveThreshold: time.Minute}})
	for _, c := range []struct {
		name   string
		cfg    ConsumerConfig
		stream *StreamConfig
		limits *AccountLimits
		want   ConsumerConfig
	}{
		{"ephemeral pull", ConsumerConfig{AckPolicy: AckExplicit}, plain, nil,
			ConsumerConfig{AckPolicy: AckExplicit, AckWait: 30 * time.Second, MaxDeliver: -1, MaxWaiting: 512,
				MaxAckPending: 1000, InactiveThreshold: 5 * time.Second}},
		{"durable push no acks", ConsumerConfig{Durable: "D", DeliverSubject: "d"}, plain, nil,
			ConsumerConfig{Durable: "D", DeliverSubject: "d", MaxDeliver: -1}},
		{"backoff sets ack wait", ConsumerConfig{Durable: "D", AckPolicy: AckAll, BackOff: []time.Duration{time.Second, time.Minute}}, plain, nil,
			ConsumerConfig{Durable: "D", AckPolicy: AckAll, BackOff: []time.Duration{time.Second, time.Minute}, AckWait: time.Second,
				MaxDeliver: -1, MaxWaiting: 512, MaxAckPending: 1000}},
		{"stream limits", ConsumerConfig{AckPolicy: AckExplicit}, limited, nil,
			ConsumerConfig{AckPolicy: AckExplicit, AckWait: 30 * time.Second, MaxDeliver: -1, MaxWaiting: 512,
				MaxAckPending: 100, InactiveThreshold: time.Minute}},
		{"account limit", ConsumerConfig{Durable: "D", AckPolicy: AckExplicit}, plain, &AccountLimits{MaxAckPending: 50},
			ConsumerConfig{Durable: "D", AckPolicy: AckExplicit, AckWait: 30 * time.Second, MaxDeliver: -1, MaxWaiting: 512, MaxAckPending: 50}},
		{"pinned", ConsumerConfig{Durable: "D", PriorityPolicy: PriorityPinnedClient, PriorityGroups: []string{"g"}}, plain, nil,
			ConsumerConfig{Durable: "D", PriorityPolicy: PriorityPinnedClient, PriorityGroups: []string{"g"}, PinnedTTL: 2 * time.Minute,
				MaxDeliver: -1, MaxWaiting: 512}},
		{"flow control ack", ConsumerConfig{Durable: "D", DeliverSubject: "d", AckPolicy: AckFlowControl}, plain, nil,
			ConsumerConfig{Durable: "D", DeliverSubject: "d", AckPolicy: AckFlowControl, FlowControl: true, Heartbeat: time.Second,
				MaxDeliver: -1, MaxAckPending: 1000}},
		{"negatives cleared", ConsumerConfig{Durable: "D", MaxDeliver: -7, MaxAckPending: -9, MaxRequestBatch: -1, Heartbeat: -1}, plain, nil,
			ConsumerConfig{Durable: "D", MaxDeliver: -1, MaxAckPending: -1, MaxWaiting: 512}},
	} {
		out, err := c.cfg.Normalize(ConsumerEnv{Stream: c.stream, Limits: c.limits})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(*out, c.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", c.name, *out, c.want)
		}
		if c.limits == nil {
			d := *c.cfg.Clone()
			d.Defaults(c.stream)
			if !reflect.DeepEqual(d, c.want) {
				t.Errorf("%s: Defaults gave %+v", c.name, d)
			}
			if c.cfg.Validate(c.stream) != nil {
				t.Errorf("%s: Validate failed", c.name)
			}
		}
	}
}

func TestConsumerAction(t *testing.T) {
	stream := normalizedStream(t, StreamConfig{Name: "S"})
	norm := func(c ConsumerConfig) *ConsumerConfig {
		out, err := c.Normalize(ConsumerEnv{Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	existing := norm(ConsumerConfig{Durable: "D", AckPolicy: AckExplicit, Metadata: map[string]string{MetaRequiredLevel: "0"}})
	same := norm(ConsumerConfig{Durable: "D", AckPolicy: AckExplicit})
	changed := norm(ConsumerConfig{Durable: "D", AckPolicy: AckExplicit, Description: "new"})
	for _, c := range []struct {
		action   ConsumerAction
		existing *ConsumerConfig
		req      *ConsumerConfig
		code     ErrorCode
	}{
		{ActionCreate, nil, same, 0},
		{ActionCreate, existing, same, 0},
		{ActionCreate, existing, changed, 10148},
		{ActionUpdate, nil, same, 10149},
		{ActionUpdate, existing, changed, 0},
		{ActionCreateOrUpdate, nil, same, 0},
		{ActionCreateOrUpdate, existing, changed, 0},
	} {
		if got := codeOf(c.action.Check(c.existing, c.req)); got != c.code {
			t.Errorf("%q existing=%v: got %d want %d", c.action, c.existing != nil, got, c.code)
		}
	}
}

func TestCheckConsumerUpdate(t *testing.T) {
	stream := normalizedStream(t, StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	old, err := (&ConsumerConfig{Durable: "D", DeliverSubject: "d", AckPolicy: AckExplicit}).Normalize(ConsumerEnv{Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		mod   func(*ConsumerConfig)
		bound bool
		code  ErrorCode
		desc  string
	}{
		{"same", func(*ConsumerConfig) {}, false, 0, ""},
		{"description", func(c *ConsumerConfig) { c.Description = "x" }, false, 0, ""},
		{"deliver policy", func(c *ConsumerConfig) { c.DeliverPolicy = DeliverNew }, false, 10012, "deliver policy can not be updated"},
		{"ack policy", func(c *ConsumerConfig) { c.AckPolicy = AckAll }, false, 10012, "ack policy can not be updated"},
		{"start time", func(c *ConsumerConfig) { c.OptStartTime = ptr(sampleTime) }, false, 10012, "start time can not be updated"},
		{"to pull", func(c *ConsumerConfig) { c.DeliverSubject = "" }, false, 10012, "can not update push consumer to pull based"},
		{"new deliver subject", func(c *ConsumerConfig) { c.DeliverSubject = "e" }, false, 0, ""},
		{"new deliver subject, bound", func(c *ConsumerConfig) { c.DeliverSubject = "e" }, true, 10013, ""},
		{"backoff", func(c *ConsumerConfig) { c.BackOff, c.MaxDeliver = []time.Duration{1, 2}, 1 }, false, 10116, ""},
	} {
		next := old.Clone()
		c.mod(next)
		err := CheckConsumerUpdate(old, next, c.bound)
		if codeOf(err) != c.code || (err != nil && !strings.Contains(err.Description, c.desc)) {
			t.Errorf("%s: got %v, want %d %q", c.name, err, c.code, c.desc)
		}
	}
}

func TestCheckWorkQueue(t *testing.T) {
	wq := normalizedStream(t, StreamConfig{Name: "W", Subjects: []string{"w.>"}, Retention: WorkQueuePolicy})
	filtered := func(f ...string) *ConsumerConfig {
		return &ConsumerConfig{Durable: "x", AckPolicy: AckExplicit, FilterSubjects: f}
	}
	for _, c := range []struct {
		name   string
		cfg    *ConsumerConfig
		others []*ConsumerConfig
		code   ErrorCode
	}{
		{"first", filtered(), nil, 0},
		{"ack all", &ConsumerConfig{AckPolicy: AckAll}, nil, 10098},
		{"deliver new", &ConsumerConfig{AckPolicy: AckExplicit, DeliverPolicy: DeliverNew}, nil, 10101},
		{"second unfiltered", filtered(), []*ConsumerConfig{filtered("w.a")}, 10099},
		{"disjoint", filtered("w.b"), []*ConsumerConfig{filtered("w.a")}, 0},
		{"overlap", filtered("w.*"), []*ConsumerConfig{filtered("w.a")}, 10100},
		{"peer unfiltered", filtered("w.b"), []*ConsumerConfig{filtered()}, 10100},
		{"direct peers ignored", filtered(), []*ConsumerConfig{{Direct: true}}, 0},
	} {
		if got := codeOf(CheckWorkQueue(wq, c.cfg, c.others)); got != c.code {
			t.Errorf("%s: got %d want %d", c.name, got, c.code)
		}
	}
	plain := normalizedStream(t, StreamConfig{Name: "S"})
	if CheckWorkQueue(plain, &ConsumerConfig{}, []*ConsumerConfig{{}}) != nil {
		t.Error("limits streams have no work-queue rules")
	}
}

func TestCheckMapping(t *testing.T) {
	for _, c := range []struct {
		src, dest string
		ok        bool
	}{
		{"a.*", "", true},
		{"a.*", "b.$1", true},
		{"a.*", "b.$2", false},
		{"a.*.*", "b.{{wildcard(2)}}.{{Wildcard( 1 )}}", true},
		{"a.>", "b.>", true},
		{"a.*", "b.>", false},
		{"a.>", "b", false},
		{">", "b.{{partition(4)}}.>", true},
		{"a.*", "b.{{split(1,-)}}", true},
		{"a.*", "b.{{nope(1)}}", false},
		{"a.*", "b..c", false},
		{"a.*", "b.*", false},
		{"a.*", "b.{{random(10)}}", true},
	} {
		if err := checkMapping(c.src, c.dest); (err == nil) != c.ok {
			t.Errorf("%q -> %q: %v", c.src, c.dest, err)
		}
	}
}
