package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The nats CLI (natscli v0.5.0) manages streams on Contrail exactly as on
// nats-server. It checks every reply against jsm.go's JSON schemas, so a
// step that exits 0 also proves the replies are well formed.

var (
	cliDateRE    = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?( \+0000 UTC|Z)?`)
	cliSizeRE    = regexp.MustCompile(`\d+(\.\d+)? (B|KiB|MiB)\b`)
	cliVersionRE = regexp.MustCompile(`(Host Version|Connected Server Version): \S+`)
	cliLevelRE   = regexp.MustCompile(`hosted at level \d+`)
	cliIDRE      = regexp.MustCompile(`(Connected Server ID|Client ID|RTT): \S+`)
	cliJSONRE    = regexp.MustCompile(`"(_nats\.ver|_nats\.level|leader|created|ts|first_ts|last_ts|bytes)": ("[^"]*"|\d+)`)
	cliRuleRE    = regexp.MustCompile(`─+`)
	cliSpaceRE   = regexp.MustCompile(` +`)
	// cliElapsedRE finds what is left of an elapsed time of a minute or
	// more ("1m2.5s" is "1mDUR" once normalize has run) in a table cell
	// or in parentheses, where the two servers' runs may straddle it.
	cliElapsedRE = regexp.MustCompile(`([(│] ?)(\d+[ydhm])+DUR`)
)

// normalizeCLI removes from CLI output what legitimately differs between
// servers and runs: times, sizes (each store counts a message's overhead
// its own way), versions, ids, and the table widths they cause.
func normalizeCLI(s, url string) string {
	// Dates first: normalize would turn their seconds into N and leave
	// the minute, which two runs may straddle.
	s = cliDateRE.ReplaceAllString(s, "DATE")
	s = normalize(s, url)
	s = cliElapsedRE.ReplaceAllString(s, "${1}DUR")
	// go-cmp's diffs (nats stream edit) mix in non-breaking spaces at
	// random, so that nobody compares them verbatim; we compare them
	// anyway, spaces being spaces.
	s = strings.ReplaceAll(s, "\u00a0", " ")
	s = cliSizeRE.ReplaceAllString(s, "SIZE")
	s = cliVersionRE.ReplaceAllString(s, "$1: VERSION")
	s = cliLevelRE.ReplaceAllString(s, "hosted at level LEVEL")
	s = cliIDRE.ReplaceAllString(s, "$1: ID")
	s = cliJSONRE.ReplaceAllString(s, `"$1": MASKED`)
	s = cliRuleRE.ReplaceAllString(s, "─")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(cliSpaceRE.ReplaceAllString(l, " "), " ")
	}
	return strings.Join(lines, "\n")
}

// cliStep is one nats CLI invocation of the stream scenario.
type cliStep struct {
	args []string
	// fail says the command must fail (exit non-zero) on both servers.
	fail bool
	// from keeps only the output from the first line containing it.
	from string
}

func streamCLIScenario() []cliStep {
	s := func(args ...string) cliStep { return cliStep{args: args} }
	return []cliStep{
		s("stream", "ls"),
		// Contrail does not answer $SYS.REQ.USER.INFO (yet), so the CLI
		// shows no user section; the JetStream part must match.
		{args: []string{"account", "info"}, from: "JetStream Account Information"},
		s("stream", "add", "S1", "--subjects", "s1.*", "--defaults"),
		s("stream", "add", "S2", "--subjects", "s2", "--storage", "memory", "--retention", "limits", "--discard", "new",
			"--max-msgs", "10", "--max-bytes", "1MB", "--max-age", "1h", "--max-msg-size", "1KB", "--dupe-window", "1m",
			"--replicas", "1", "--max-msgs-per-subject", "5", "--deny-delete", "--deny-purge",
			"--allow-direct", "--description", "the second", "--metadata", "k=v", "--allow-msg-ttl",
			"--first-sequence", "7", "--max-consumers", "5", "--defaults"),
		{args: []string{"stream", "add", "S3", "--subjects", "s1.x", "--defaults"}, fail: true},
		s("pub", "s1.a", "hello {{Count}}", "--count", "3", "--jetstream"),
		s("pub", "s1.b", "other", "--jetstream", "-H", "X-A:1"),
		s("pub", "s2", "into S2", "--jetstream"),
		s("stream", "info", "S1"),
		s("stream", "info", "S2"),
		s("stream", "info", "S2", "-j"),
		s("stream", "ls"),
		s("stream", "ls", "-n"),
		s("stream", "get", "S1", "1"),
		s("stream", "get", "S1", "--last-for", "s1.a"),
		s("stream", "get", "S2", "7"),
		s("stream", "rmm", "S1", "2", "-f"),
		{args: []string{"stream", "rmm", "S1", "2", "-f"}, fail: true},
		{args: []string{"stream", "rmm", "S2", "7", "-f"}, fail: true},
		s("stream", "subjects", "S1"),
		s("stream", "purge", "S1", "-f", "--subject", "s1.a", "--keep", "1"),
		s("stream", "purge", "S1", "-f", "--seq", "4"),
		s("stream", "info", "S1"),
		s("stream", "purge", "S1", "-f"),
		{args: []string{"stream", "purge", "S2", "-f"}, fail: true},
		s("stream", "report"),
		{args: []string{"account", "info"}, from: "JetStream Account Information"},
		s("stream", "edit", "S1", "--max-msgs", "100", "-f"),
		s("stream", "rm", "S1", "-f"),
		{args: []string{"stream", "rm", "S1", "-f"}, fail: true},
		{args: []string{"stream", "info", "S1"}, fail: true},
		s("stream", "ls"),
	}
}

// runStreamCLI runs the scenario against one server and returns each
// step's normalized output.
func runStreamCLI(t *testing.T, tg cliTarget) []string {
	var out []string
	for i, st := range streamCLIScenario() {
		code, stdout, stderr := natsRun(t, tg.url, st.args...)
		if failed := code != 0; failed != st.fail {
			t.Errorf("%s: nats %s: exit %d, want failure %v\n%s%s", tg.name, strings.Join(st.args, " "), code, st.fail, stdout, stderr)
		}
		text := stdout + stderr
		if st.from != "" {
			if i := strings.Index(text, st.from); i >= 0 {
				text = text[i:]
			}
		}
		out = append(out, "step "+strconv.Itoa(i)+" exit "+strconv.Itoa(code)+"\n"+normalizeCLI(text, tg.url))
	}
	return out
}

func TestJSStreamCLI(t *testing.T) {
	t.Parallel()
	natsCLI(t)
	n := startNode(t, nodeOpts{})
	ref := startRefJS(t)
	targets := []cliTarget{{"contrail", n.URL, n.MonURL}, {"nats-server", ref.URL, ref.MonURL}}
	results := make([][]string, len(targets))
	t.Run("sessions", func(t *testing.T) {
		for i, tg := range targets {
			t.Run(tg.name, func(t *testing.T) {
				t.Parallel()
				results[i] = runStreamCLI(t, tg)
			})
		}
	})
	if t.Failed() {
		return
	}
	steps := streamCLIScenario()
	for i := range steps {
		t.Logf("nats %s (normalized):\n%s", strings.Join(steps[i].args, " "), results[0][i])
		if results[0][i] != results[1][i] {
			t.Errorf("nats %s: contrail and nats-server differ\n--- contrail ---\n%s\n--- nats-server ---\n%s",
				strings.Join(steps[i].args, " "), results[0][i], results[1][i])
		}
	}
}
