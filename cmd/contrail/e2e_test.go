package main

// End-to-end tests: they build the real contrail binary once, start one
// node per test on free loopback ports, and drive it with stock clients:
// nats.go, the nats CLI, and raw TCP where the exact bytes matter. Where
// behaviour is compared, nats-server itself is started as the reference.
//
// Files:
//   e2e_helpers_test.go   node and reference-server lifecycle, raw conns,
//                         HTTP and polling helpers
//   e2e_core_test.go      pub/sub, wildcards, queues, request/reply, echo
//   e2e_protocol_test.go  raw protocol framing, errors, max payload
//   e2e_limits_test.go    slow consumers, stale connections, max conns,
//                         signals
//   e2e_tls_test.go       TLS by flag and by config, mTLS, TLS first
//   e2e_cli_test.go       the contrail command line and the nats CLI
//   e2e_monitor_test.go   /healthz /varz /connz /subsz
//   e2e_jsz_test.go       /jsz and the /varz jetstream section
//
// JetStream streams (e2e_js_*):
//   e2e_js_helpers_test.go   JetStream targets, raw API requests, reply
//                            masking and diffing, restarts
//   e2e_js_compare_test.go   the same API sessions against nats-server,
//                            reply by reply, memory and file storage
//   e2e_js_stream_test.go    account info, CRUD, lists and names (paged),
//                            info details, get/delete, direct get, purge
//   e2e_js_publish_test.go   PubAcks, dedup (across restarts),
//                            Nats-Expected-* headers
//   e2e_js_limits_test.go    limits and discard, max_age and Nats-TTL
//                            expiry, sealed/deny_*, rollups, no_ack
//   e2e_js_recovery_test.go  restart recovery after SIGTERM and kill -9;
//                            kill -9 with thousands of async publishes in
//                            flight
//   e2e_js_legacy_test.go    the legacy nc.JetStream() context
//   e2e_js_hostile_test.go   hostile input on every $JS.API route, side by
//                            side with nats-server, and the differences
//   e2e_js_cli_test.go       nats stream/pub/account commands, output
//                            compared with nats-server's
//   e2e_flood_test.go        one raw connection floods a capped stream:
//                            bounded RSS, a neighbour account's publishes
//                            acknowledged promptly (1 GiB with
//                            CONTRAIL_SOAK=1); the ingest bounds' config
//
// Consumers, KV and Object Store (e2e_jsc_*; tests named TestJSC<Upper>,
// so `go test -run 'TestJSC[A-Z]'` runs just them):
//   e2e_jsc_helpers_test.go  shared node per test, publishing, fetching,
//                            consumer info, collectors, the nats CLI
//   e2e_jsc_pull_test.go     Fetch, FetchNoWait, FetchBytes, Next, Consume
//                            with heartbeats, Messages; 404/408/409 as
//                            nats.go surfaces them; abandoned requests
//   e2e_jsc_push_test.go     legacy Subscribe/QueueSubscribe/SubscribeSync/
//                            ChanSubscribe, jetstream PushConsumer, flow
//                            control and heartbeats, interest, ordered
//                            consumers (both APIs) across a reset
//   e2e_jsc_ack_test.go      every ack kind, ack policies, ack wait and
//                            backoff, max_deliver advisory, max_ack_pending,
//                            filters, deliver policies, headers_only,
//                            inactive_threshold, pause, create/update
//   e2e_jsc_legacy_test.go   legacy PullSubscribe, Bind, start options,
//                            consumer management errors
//   e2e_jsc_retention_test.go  work queue (10k messages, three pullers),
//                            interest retention compared with nats-server
//   e2e_jsc_restart_test.go  durable consumers across SIGTERM and kill -9
//   e2e_jsc_kv_test.go       KV session compared with nats-server, TTLs,
//                            the nats kv commands
//   e2e_jsc_obj_test.go      Object Store (5 MiB, links, watch, seal) and
//                            the nats object commands
//   e2e_jsc_priority_test.go priority groups: pinned client, unpin, overflow
//   e2e_jsc_cli_test.go      nats consumer add/info/ls/next/rm/report
//   e2e_jsc_compare_test.go  consumer API, pull statuses, push transcript,
//                            consumer state through purges, side by side
//                            with nats-server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// e2eVersion is stamped into the test binary so `contrail version` can be
// checked for it.
const e2eVersion = "e2e-test-1.2.3"

// contrailBin is the binary TestMain built.
var contrailBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "contrail-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	contrailBin = filepath.Join(dir, "contrail")
	args := []string{"build", "-o", contrailBin, "-ldflags", "-X main.version=" + e2eVersion}
	if raceEnabled() {
		// The node runs under the race detector too, so races in the
		// server under real client traffic fail the test that caused them.
		args = append(args, "-race")
	}
	args = append(args, ".")
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building contrail:", err)
		return 1
	}
	return m.Run()
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
