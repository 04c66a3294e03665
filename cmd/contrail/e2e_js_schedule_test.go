package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pubCmp is a step publishing one message with headers (key, value pairs).
func pubCmp(name, subj, body string, hdr ...string) cmpStep {
	return cmpStep{name: name, do: func(t testing.TB, nc *nats.Conn) apiReply {
		return exchange(t, nc, apiStep{name: name, subj: subj, body: body, hdr: hdr})
	}}
}

// seqMasked masks a step's sequence.
func seqMasked(st cmpStep) cmpStep {
	st.mask = append(st.mask, "seq")
	return st
}

// lastMsgCmp waits (up to 10 s) for a message on subj of stream and
// reduces it to its subject, body and headers; times in headers (the
// next run of a repeating schedule) compare as TIME. With notBefore set,
// a message that arrived before that time fails the test.
func lastMsgCmp(name, stream, subj string, notBefore *time.Time) cmpStep {
	return cmpStep{name: name, do: func(t testing.TB, nc *nats.Conn) apiReply {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := js.Stream(ctx, stream)
			var m *jetstream.RawStreamMsg
			if err == nil {
				m, err = s.GetLastMsgForSubject(ctx, subj)
			}
			cancel()
			if err == nil {
				if notBefore != nil && m.Time.Before(*notBefore) {
					t.Errorf("%s: stored at %v, before its schedule %v", name, m.Time, *notBefore)
				}
				hdr := map[string]any{}
				for k, v := range m.Header {
					hdr[k] = strings.Join(v, ",")
				}
				doc := map[string]any{"subject": m.Subject, "data": string(m.Data), "hdr": hdr}
				return apiReply{raw: []byte(canonJSON(doc)), doc: doc}
			}
			if !errors.Is(err, jetstream.ErrMsgNotFound) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", name, err)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}}
}

// TestJSCompareSchedules: schedules refused on a stream without them and
// for each invalid header, a one-off schedule firing on time with its
// headers carried over, a repeating one sampling its source, and a purge
// ending it, compared with nats-server.
func TestJSCompareSchedules(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	mask := []string{"created", "ts"}
	// Whole seconds ahead: @at takes RFC 3339 without fractions.
	at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	atPat := "@at " + at.UTC().Format(time.RFC3339)
	later := "@at " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	steps := []cmpStep{
		apiCmp("create schedule stream", "$JS.API.STREAM.CREATE.SCH", `{"name":"SCH","subjects":["sch.>"],"storage":"memory","allow_msg_schedules":true,"allow_msg_ttl":true}`, mask...),
		apiCmp("create plain stream", "$JS.API.STREAM.CREATE.PLAIN", `{"name":"PLAIN","subjects":["plain.>"],"storage":"memory"}`, mask...),
		pubCmp("schedule to plain stream", "plain.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "plain.t"),
		pubCmp("invalid schedule to plain stream", "plain.s", "x", "Nats-Schedule", "whenever"),
		pubCmp("schedule purge to plain stream", "plain.s", "x", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "plain.q"),
		pubCmp("scheduler without next", "plain.s", "x", "Nats-Scheduler", "plain.q"),
		pubCmp("stream source header", "plain.s", "x", "Nats-Stream-Source", "OTHER 1"),
		pubCmp("schedule next not purge", "sch.s", "x", "Nats-Schedule-Next", "tomorrow", "Nats-Scheduler", "sch.q"),
		pubCmp("pattern invalid", "sch.s", "x", "Nats-Schedule", "@every 100ms", "Nats-Schedule-Target", "sch.t"),
		pubCmp("no target", "sch.s", "x", "Nats-Schedule", later),
		pubCmp("target is itself", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.s"),
		pubCmp("target outside the stream", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "other.t"),
		pubCmp("target wildcard", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.*"),
		pubCmp("ttl invalid", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.t", "Nats-Schedule-TTL", "soon"),
		pubCmp("rollup invalid", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.t", "Nats-Schedule-Rollup", "all"),
		pubCmp("own rollup all", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.t", "Nats-Rollup", "all"),
		pubCmp("source is target", "sch.s", "x", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.t", "Nats-Schedule-Source", "sch.t"),
		pubCmp("cron with five fields", "sch.s", "x", "Nats-Schedule", "0 * * * *", "Nats-Schedule-Target", "sch.t"),
		pubCmp("cron out of range", "sch.s", "x", "Nats-Schedule", "0 0 25 * * *", "Nats-Schedule-Target", "sch.t"),
		pubCmp("time zone unknown", "sch.s", "x", "Nats-Schedule", "0 0 9 * * *", "Nats-Schedule-Target", "sch.t", "Nats-Schedule-Time-Zone", "Mars/Olympus"),
		pubCmp("time zone empty", "sch.s", "x", "Nats-Schedule", "0 0 9 * * *", "Nats-Schedule-Target", "sch.t", "Nats-Schedule-Time-Zone", ""),
		pubCmp("time zone with @every", "sch.s", "x", "Nats-Schedule", "@every 1m", "Nats-Schedule-Target", "sch.t", "Nats-Schedule-Time-Zone", "Europe/Paris"),
		pubCmp("time zone to plain stream", "plain.s", "x", "Nats-Schedule-Time-Zone", "Mars/Olympus"),
		apiCmp("nothing stored", "$JS.API.STREAM.INFO.SCH", "", mask...),
		pubCmp("daily in a time zone", "sch.daily", "d", "Nats-Schedule", "@daily", "Nats-Schedule-Target", "sch.dout", "Nats-Schedule-Time-Zone", "Asia/Tokyo"),

		pubCmp("one-off schedule", "sch.once", "hello", "Nats-Schedule", atPat, "Nats-Schedule-Target", "sch.out",
			"Nats-Schedule-TTL", "30s", "Nats-Msg-Id", "once", "X-Carried", "yes"),
		lastMsgCmp("the schedule stored", "SCH", "sch.once", nil),
		lastMsgCmp("its copy, on time", "SCH", "sch.out", &at),
		apiCmp("the one-off is gone", "$JS.API.STREAM.MSG.GET.SCH", `{"last_by_subj":"sch.once"}`),

		pubCmp("replaced schedule", "sch.rep", "old", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.rout"),
		pubCmp("its replacement", "sch.rep", "new", "Nats-Schedule", later, "Nats-Schedule-Target", "sch.rout"),
		apiCmp("one schedule left", "$JS.API.STREAM.INFO.SCH", `{"subjects_filter":"sch.rep"}`, mask...),

		pubCmp("source", "sch.src", "sampled"),
		pubCmp("repeating schedule", "sch.tick", "own", "Nats-Schedule", "@every 1s", "Nats-Schedule-Target", "sch.ticks",
			"Nats-Schedule-Source", "sch.src"),
		lastMsgCmp("a repeating copy", "SCH", "sch.ticks", nil),
		apiCmp("purge the schedule", "$JS.API.STREAM.PURGE.SCH", `{"filter":"sch.tick"}`),
		seqMasked(pubCmp("cron every second", "sch.cron", "c", "Nats-Schedule", "* * * * * *", "Nats-Schedule-Target", "sch.couts")),
		lastMsgCmp("a cron copy", "SCH", "sch.couts", nil),
		apiCmp("purge the cron schedule", "$JS.API.STREAM.PURGE.SCH", `{"filter":"sch.cron"}`),
		// How many copies the repeating schedule made before its purge
		// depends on timing, so the sequences from here on may differ.
		seqMasked(pubCmp("client purge of a missing schedule", "sch.p", "", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sch.nothing")),
		seqMasked(pubCmp("client purge of a plain subject", "sch.p", "", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sch.src")),
		seqMasked(pubCmp("client purge of the replaced schedule", "sch.p", "", "Nats-Schedule-Next", "purge", "Nats-Scheduler", "sch.rep")),
		apiCmp("the replaced schedule purged", "$JS.API.STREAM.MSG.GET.SCH", `{"last_by_subj":"sch.rep"}`),
	}
	compareSteps(t, ours.nc, ref.nc, steps)
}

// TestClusterSchedules: a repeating schedule on an R3 stream keeps firing
// after its leader is killed (the new leader rebuilds the schedules from
// the replicated messages), and a one-off fires once.
func TestClusterSchedules(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, js := clusterJS(t, clusterURLs(nodes))
	s := createR3(t, js, jetstream.StreamConfig{Name: "SCH", Subjects: []string{"sch.>"}, Replicas: 3, AllowMsgSchedules: true})
	pub := func(subj string, hdr ...string) {
		t.Helper()
		m := nats.NewMsg(subj)
		for i := 0; i+1 < len(hdr); i += 2 {
			m.Header.Set(hdr[i], hdr[i+1])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(20)); err != nil {
			t.Fatalf("publish %s: %v", subj, err)
		}
	}
	pub("sch.tick", "Nats-Schedule", "@every 1s", "Nats-Schedule-Target", "sch.ticks")
	pub("sch.once", "Nats-Schedule", "@at "+time.Now().UTC().Format(time.RFC3339), "Nats-Schedule-Target", "sch.out")
	lastSeq := func(subj string) uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return 0
		}
		return m.Sequence
	}
	waitFor(t, clusterTimeout(), "a scheduled copy", func() bool { return lastSeq("sch.ticks") > 0 })
	waitFor(t, clusterTimeout(), "the one-off's copy", func() bool { return lastSeq("sch.out") > 0 })
	before := lastSeq("sch.ticks")
	leader, _ := streamLeader(t, js, nodes, "SCH")
	leader.kill(t)
	waitFor(t, 3*clusterTimeout(), "a copy from the new leader", func() bool { return lastSeq("sch.ticks") > before })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("sch.out"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects["sch.out"]; n != 1 {
		t.Fatalf("the one-off fired %d times", n)
	}
}
