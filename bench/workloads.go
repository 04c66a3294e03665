package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Names shared by natscli's bench defaults; the JetStream workloads rely on
// them (nats bench js fetch/consume/ordered read the stream "benchstream",
// nats bench kv put/get use the bucket "benchbucket").
const (
	coreSubject = "bench.core"
	jsSubject   = "bench.js"
	streamName  = "benchstream"
	bucketName  = "benchbucket"
)

// Workload is one entry of the benchmark table. Every round runs, against
// one server: Reset (errors ignored), then Setup (must succeed), then the
// measured command(s). Commands are natscli argument lists without the
// server URL; commands starting with "bench" additionally get --msgs,
// --size and --no-progress (and --csv for the measured ones).
type Workload struct {
	// Name identifies the workload in -workloads and in the report.
	Name string
	// Enabled marks the workloads run when -workloads is not given.
	Enabled bool
	// Div divides -msgs to get this workload's message count, so that slow,
	// synchronous workloads finish in a reasonable time.
	Div int64
	// Reset commands remove state left by earlier rounds; their failures
	// are ignored (e.g. "stream not found" on the first round).
	Reset [][]string
	// Setup commands prepare state for the measurement (e.g. fill a stream).
	Setup [][]string
	// Sub, when set, is started first and waited for until it has
	// subscribed; its msgs/s is the headline figure and Main's msgs/s is
	// reported as a secondary figure ("core pubsub").
	Sub []string
	// Main is the measured command.
	Main []string
	// Latency reports Main's p50 per-operation latency as well.
	Latency bool
	// Sync marks a workload of durable writes acknowledged one at a time
	// per client (js pub sync, kv put): it runs with -clients clients,
	// and the report puts the fsync p50 of the data dirs' disk beside it
	// with the latency target (see syncTarget).
	Sync bool
}

// withClients returns w run by n concurrent clients (natscli's
// --clients; the messages are split among them) if w is a Sync workload
// and n > 1, named so that the report tells the runs apart; otherwise w.
func (w Workload) withClients(n int) Workload {
	if !w.Sync || n <= 1 {
		return w
	}
	w.Name = fmt.Sprintf("%s x%d", w.Name, n)
	w.Main = append(slices.Clip(w.Main), "--clients", strconv.Itoa(n))
	return w
}

// metric describes one reported figure of a workload.
type metric struct {
	name        string
	lowerBetter bool
}

// metrics lists the figures a workload reports, headline first.
func (w Workload) metrics() []metric {
	if w.Sub != nil {
		return []metric{{name: "sub msgs/s"}, {name: "pub msgs/s"}}
	}
	m := []metric{{name: "msgs/s"}}
	if w.Latency {
		m = append(m, metric{name: "p50 latency (us)", lowerBetter: true})
	}
	return m
}

// msgs returns the message count for this workload given the -msgs flag.
func (w Workload) msgs(total int64) int64 {
	div := max(w.Div, 1)
	return max(total/div, 1)
}

var (
	rmStream = []string{"stream", "rm", streamName, "--force"}
	rmBucket = []string{"kv", "del", bucketName, "--force"}
	// jsPubFlags create (or verify) the file-backed R1 stream and purge it,
	// so each round starts from an empty stream even if Reset failed.
	jsPubFlags = []string{"--create", "--purge", "--storage", "file", "--replicas", "1"}
	fillStream = append([]string{"bench", "js", "pub", "async", jsSubject}, jsPubFlags...)
)

// workloads is the benchmark table. To enable a workload by default, set
// Enabled; until then it runs with -workloads all or by name.
var workloads = []Workload{
	{
		Name:    "core pubsub",
		Enabled: true,
		Div:     1,
		Sub:     []string{"bench", "sub", coreSubject},
		Main:    []string{"bench", "pub", coreSubject},
	},
	{
		Name:    "js pub async",
		Enabled: true,
		Div:     2,
		Reset:   [][]string{rmStream},
		Main:    append([]string{"bench", "js", "pub", "async", jsSubject}, jsPubFlags...),
	},
	{
		// A stream at its size limit, evicting its oldest message for
		// each one it stores: how most production streams run, and a
		// path the uncapped workloads never take.
		// (natscli's --maxbytes makes a discard-new stream, which
		// refuses instead, so Setup makes the stream.)
		Name:    "js pub async capped",
		Enabled: true,
		Div:     2,
		Reset:   [][]string{rmStream},
		Setup: [][]string{{"stream", "add", streamName, "--subjects", jsSubject, "--storage", "file", "--replicas", "1",
			"--max-bytes", "1MB", "--discard", "old", "--defaults"}},
		Main: []string{"bench", "js", "pub", "async", jsSubject, "--purge"},
	},
	{
		Name:    "js pub sync",
		Enabled: true,
		Div:     20,
		Reset:   [][]string{rmStream},
		Main:    append([]string{"bench", "js", "pub", "sync", jsSubject}, jsPubFlags...),
		Latency: true,
		Sync:    true,
	},
	{
		Name:    "js fetch",
		Enabled: true,
		Div:     2,
		Reset:   [][]string{rmStream},
		Setup:   [][]string{fillStream},
		Main:    []string{"bench", "js", "fetch"},
	},
	{
		Name:    "js consume",
		Enabled: true,
		Div:     2,
		Reset:   [][]string{rmStream},
		Setup:   [][]string{fillStream},
		Main:    []string{"bench", "js", "consume"},
	},
	{
		Name:    "js ordered",
		Enabled: true,
		Div:     2,
		Reset:   [][]string{rmStream},
		Setup:   [][]string{fillStream},
		Main:    []string{"bench", "js", "ordered"},
	},
	{
		Name:    "kv put",
		Enabled: true,
		Div:     20,
		Reset:   [][]string{rmBucket},
		Main:    []string{"bench", "kv", "put", "--storage", "file", "--replicas", "1"},
		Latency: true,
		Sync:    true,
	},
	{
		Name:    "kv get",
		Enabled: true,
		Div:     20,
		Reset:   [][]string{rmBucket},
		Setup:   [][]string{{"bench", "kv", "put", "--storage", "file", "--replicas", "1"}},
		Main:    []string{"bench", "kv", "get"},
		Latency: true,
	},
}

// normalizeName lets "js-pub-async", "js_pub_async" and "JS pub async"
// all name the same workload.
func normalizeName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer("-", " ", "_", " ").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// selectWorkloads resolves the -workloads flag: "" means the enabled ones,
// "all" means every entry, otherwise a comma-separated list of names.
func selectWorkloads(spec string) ([]Workload, error) {
	spec = strings.TrimSpace(spec)
	var out []Workload
	switch spec {
	case "":
		for _, w := range workloads {
			if w.Enabled {
				out = append(out, w)
			}
		}
		return out, nil
	case "all":
		return append(out, workloads...), nil
	}
	byName := map[string]Workload{}
	var names []string
	for _, w := range workloads {
		byName[normalizeName(w.Name)] = w
		names = append(names, fmt.Sprintf("%q", w.Name))
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		n := normalizeName(part)
		if n == "" || seen[n] {
			continue
		}
		w, ok := byName[n]
		if !ok {
			sort.Strings(names)
			return nil, fmt.Errorf("unknown workload %q (known: %s, or all)", part, strings.Join(names, ", "))
		}
		seen[n] = true
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-workloads %q selects no workload", spec)
	}
	return out, nil
}
