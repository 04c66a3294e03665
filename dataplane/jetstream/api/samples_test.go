package api

import (
	"testing"
	"time"
)

// Sample values shared by the JSON and schema tests: as full as a reply
// gets, so every member we send is exercised.

var sampleTime = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

func ptr[T any](v T) *T { return &v }

func sampleStreamConfig(t *testing.T) StreamConfig {
	t.Helper()
	cfg := StreamConfig{
		Name:        "ORDERS",
		Description: "orders in flight",
		Subjects:    []string{"orders.>", "returns.*"},
		MaxAge:      time.Hour,
		MaxMsgsPer:  10,
		Storage:     FileStorage,
		Compression: S2Compression,
		AllowDirect: true,
		AllowRollup: true,
		AllowMsgTTL: true,
		FirstSeq:    5,
		ConsumerLimits: StreamConsumerLimits{
			InactiveThreshold: time.Minute, MaxAckPending: 5000,
		},
		SubjectDeleteMarkerTTL: 10 * time.Minute,
		RePublish:              &RePublish{Source: "orders.>", Destination: "repub.orders.>", HeadersOnly: true},
		Placement:              &Placement{Cluster: "east", Tags: []string{"ssd"}},
		Metadata:               map[string]string{"owner": "team-a"},
	}
	cfg.StampRequiredLevel()
	out, err := cfg.Normalize(StreamEnv{})
	if err != nil {
		t.Fatalf("sample stream config: %v", err)
	}
	return *out
}

func sampleStreamInfo(t *testing.T) *StreamInfo {
	cfg := sampleStreamConfig(t)
	return &StreamInfo{
		Config:  *cfg.WithServerMetadata("2.11.0", 1),
		Created: sampleTime,
		State: StreamState{
			Msgs: 3, Bytes: 300, FirstSeq: 5, FirstTime: sampleTime, LastSeq: 8,
			LastTime: sampleTime.Add(time.Second), NumSubjects: 2,
			Subjects: map[string]uint64{"orders.1": 2, "returns.x": 1}, NumDeleted: 1, Deleted: []uint64{6},
			Lost: &LostStreamData{Msgs: []uint64{7}, Bytes: 10}, Consumers: 2,
		},
		Cluster: &ClusterInfo{
			Name: "east", RaftGroup: "S-R3F-abc", Leader: "n1", LeaderSince: ptr(sampleTime),
			Replicas: []*PeerInfo{{Name: "n2", Current: true, Active: 12 * time.Millisecond, Peer: "p2"},
				{Name: "n3", Offline: true, Active: time.Minute, Lag: 4, Peer: "p3"}},
		},
		Sources: []*StreamSourceInfo{{Name: "OTHER", Lag: 2, Active: -1,
			SubjectTransforms: []SubjectTransform{{Source: "a.>", Destination: "b.>"}}}},
		Alternates: []StreamAlternate{{Name: "ORDERS", Cluster: "east"}},
		TimeStamp:  sampleTime,
	}
}

func emptyStreamInfo(t *testing.T) *StreamInfo {
	cfg := StreamConfig{Name: "EMPTY"}
	out, err := cfg.Normalize(StreamEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return &StreamInfo{Config: *out, Created: sampleTime, TimeStamp: sampleTime}
}

func mirrorStreamInfo(t *testing.T) *StreamInfo {
	cfg := StreamConfig{Name: "M", Mirror: &StreamSource{Name: "ORDERS", OptStartTime: ptr(sampleTime),
		External: &ExternalStream{APIPrefix: "$JS.hub.API", DeliverPrefix: "deliver.hub"}}}
	out, err := cfg.Normalize(StreamEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return &StreamInfo{Config: *out, Created: sampleTime, TimeStamp: sampleTime,
		Mirror: &StreamSourceInfo{Name: "ORDERS", Lag: 0, Active: 5 * time.Second,
			External: &ExternalStream{APIPrefix: "$JS.hub.API", DeliverPrefix: "deliver.hub"},
			Error:    NewStreamNotFoundError()}}
}

func sampleConsumerInfo(t *testing.T, durable bool) *ConsumerInfo {
	t.Helper()
	stream := sampleStreamConfig(t)
	cfg := ConsumerConfig{
		Name: "worker", Description: "does work", AckPolicy: AckExplicit,
		FilterSubjects: []string{"orders.new", "orders.paid"}, MaxDeliver: 5,
		BackOff: []time.Duration{time.Second, 5 * time.Second}, MaxRequestBatch: 100,
		MaxRequestExpires: time.Minute, MaxRequestMaxBytes: 1 << 20, HeadersOnly: true,
		Metadata: map[string]string{"k": "v"}, PauseUntil: ptr(sampleTime),
		PriorityGroups: []string{"jobs"}, PriorityPolicy: PriorityPinnedClient,
	}
	if durable {
		cfg = ConsumerConfig{Durable: "PUSH", DeliverSubject: "deliver.push", DeliverGroup: "q",
			DeliverPolicy: DeliverByStartTime, OptStartTime: ptr(sampleTime), AckPolicy: AckAll,
			ReplayPolicy: ReplayOriginal, RateLimit: 1000, SampleFrequency: "50%", FlowControl: true,
			Heartbeat: 5 * time.Second, FilterSubject: "orders.>"}
	}
	cfg.StampRequiredLevel()
	out, err := cfg.Normalize(ConsumerEnv{Stream: &stream})
	if err != nil {
		t.Fatalf("sample consumer config: %v", err)
	}
	return &ConsumerInfo{
		Stream: "ORDERS", Name: out.name(), Created: sampleTime,
		Config:        out.WithServerMetadata("2.11.0", 1),
		Delivered:     SequenceInfo{Consumer: 10, Stream: 12, Last: ptr(sampleTime)},
		AckFloor:      SequenceInfo{Consumer: 8, Stream: 9},
		NumAckPending: 2, NumRedelivered: 1, NumWaiting: 3, NumPending: 40,
		Cluster: &ClusterInfo{Leader: "n1"}, PushBound: durable, Paused: !durable,
		PauseRemaining: time.Minute, TimeStamp: sampleTime,
		PriorityGroups: []PriorityGroupState{{Group: "jobs", PinnedClientID: "abc", PinnedTS: sampleTime}},
	}
}

func sampleAccountInfo() *AccountInfo {
	lim := AccountLimits{MaxMemory: 1 << 30, MaxStore: -1, MaxStreams: 10, MaxConsumers: -1,
		MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: 1 << 30, MaxBytesRequired: true}
	tier := Tier{Memory: 1, Store: 2, ReservedMemory: 3, ReservedStore: 4, Streams: 1, Consumers: 2, Limits: lim}
	return &AccountInfo{
		Tier:   Tier{Memory: 1, Store: 2, Streams: 1, Consumers: 2},
		Domain: "hub",
		API:    APIStats{Level: 1, Total: 100, Errors: 3, Inflight: 1},
		Tiers:  map[string]Tier{"R1": tier, "R3": {Limits: lim}},
	}
}
