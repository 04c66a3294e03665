package main

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func TestParseBenchCSV(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		csv       string
		rate, p50 float64
	}{
		// Captured from natscli v0.5.0 `nats bench sub --csv`.
		"sub": {"#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs\n" +
			"TdtTD8uQ68yHRFDXqzrsmQ,S0,1000000,128000000,986555,126279049.415040,1.013628\n", 986555, 0},
		// Captured from `nats bench js pub sync --csv`.
		"sync": {"#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,MinLatencyMicroSecs,AvgLatencyMicroSecs,MaxLatencyMicroSecs,P50LatencyMicroSecs,P90LatencyMicroSecs,P99LatencyMicroSecs,P99.9LatencyMicroSecs,StdDevLatencyMicroSecs\n" +
			"f4qYECXNkZN62t1dL6PPTd,P0,200000,12800000,6319,808906.214859,15.823837,34.161000,157.959097,7943.921000,151.445000,226.177000,334.827000,1226.939000,191.264225\n", 6319, 151.445},
		"two clients": {"#RunID,ClientID,MsgsPerSec\nx,P0,100\nx,P1,50\n", 150, 0},
	}
	for name, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".csv")
		if err := os.WriteFile(path, []byte(c.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := parseBenchCSV(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.rate != c.rate || math.Abs(st.p50-c.p50) > 1e-9 {
			t.Errorf("%s: got rate %v p50 %v, want %v %v", name, st.rate, st.p50, c.rate, c.p50)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	_ = os.WriteFile(bad, []byte("#RunID,ClientID\n"), 0o644)
	if _, err := parseBenchCSV(bad); err == nil {
		t.Error("header-only CSV: want error")
	}
}

func TestSelectWorkloads(t *testing.T) {
	names := func(ws []Workload) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.Name)
		}
		return out
	}
	var enabled []string
	for _, w := range workloads {
		if w.Enabled {
			enabled = append(enabled, w.Name)
		}
	}
	def, err := selectWorkloads("")
	if err != nil || !reflect.DeepEqual(names(def), enabled) {
		t.Errorf("default: %v %v", names(def), err)
	}
	all, _ := selectWorkloads("all")
	if len(all) != len(workloads) {
		t.Errorf("all: got %d workloads", len(all))
	}
	got, err := selectWorkloads("js-pub-async, KV_get,js pub async")
	if err != nil || !reflect.DeepEqual(names(got), []string{"js pub async", "kv get"}) {
		t.Errorf("list: %v %v", names(got), err)
	}
	if _, err := selectWorkloads("nope"); err == nil {
		t.Error("unknown name: want error")
	}
}

func TestMedianAndFormat(t *testing.T) {
	r := &result{rounds: map[string][][]float64{sideContrail: {{3}, {1}, {2}}, sideNatsServer: {{4}, {1}}}}
	if m := r.median(sideContrail, 0); m != 2 {
		t.Errorf("odd median = %v", m)
	}
	if m := r.median(sideNatsServer, 0); m != 2.5 {
		t.Errorf("even median = %v", m)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWarnings(t *testing.T) {
	p := &proc{out: newWatchBuffer("")}
	_, _ = p.out.Write([]byte("10:00:00 Starting x\n10:00:01 Fetch  timeout!\n10:00:02 Fetch  timeout!\n" +
		"10:00:03 WARNING: at least one of the pull consumer Fetch operation timed out. These results are not optimal!\n"))
	got := warnings(p)
	want := []string{"Fetch  timeout! (x2)", "WARNING: at least one of the pull consumer Fetch operation timed out. These results are not optimal!"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q", got)
	}
}

func TestParseStatusKiB(t *testing.T) {
	// Excerpt of a real /proc/<pid>/status.
	status := []byte("Name:\tnats-server\nVmPeak:\t 1262292 kB\nVmHWM:\t   41084 kB\nVmRSS:\t   37012 kB\n" +
		"RssAnon:\t   21100 kB\nRssFile:\t   15912 kB\nRssShmem:\t       0 kB\nThreads:\t9\n")
	for field, want := range map[string]int64{"VmRSS": 37012, "RssAnon": 21100, "RssFile": 15912} {
		if got, err := parseStatusKiB(status, field); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", field, got, err, want)
		}
	}
	if _, err := parseStatusKiB([]byte("Name:\tkthreadd\nThreads:\t1\n"), "VmRSS"); err == nil {
		t.Error("no VmRSS line: want error")
	}
	if _, err := parseStatusKiB([]byte("VmRSS:\t12 MB\n"), "VmRSS"); err == nil {
		t.Error("odd unit: want error")
	}
	// "VmRSS" must not match a longer field name's prefix.
	if got, err := parseStatusKiB([]byte("VmRSSx:\t1 kB\nVmRSS:\t2 kB\n"), "VmRSS"); err != nil || got != 2 {
		t.Errorf("prefix field: %d, %v", got, err)
	}
}

func TestRSSStable(t *testing.T) {
	const s = time.Second
	series := func(step time.Duration, kib ...int64) []rssSample {
		var out []rssSample
		for i, k := range kib {
			out = append(out, rssSample{at: time.Duration(i) * step, kib: k})
		}
		return out
	}
	cases := []struct {
		name    string
		samples []rssSample
		want    bool
	}{
		{"empty", nil, false},
		{"one sample", series(s/4, 1000), false},
		{"flat but shorter than the window", series(s/4, 1000, 1000, 1000, 1000), false},
		{"flat over exactly the window", series(s/4, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), true},
		{"0.9% drift", series(s/2, 1000, 1003, 1006, 1009, 1009), true},
		{"1.1% change", series(s/2, 1000, 1000, 1011, 1011, 1011), false},
		{"growth that stopped", series(s/2, 500, 700, 900, 1000, 1001, 1002, 1003, 1004), true},
		{"still growing", series(s/2, 500, 700, 900, 1000, 1050, 1100, 1150), false},
		{"drop within the window", series(s/2, 1000, 1000, 1000, 1000, 1000, 900), false},
		{"old spike outside the window", series(s/2, 1000, 5000, 1000, 1000, 1000, 1000, 1000), true},
		{"zero RSS", series(s, 0, 0, 0), false},
	}
	for _, c := range cases {
		if got := rssStable(c.samples, 2*s, 0.01); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseMemStats(t *testing.T) {
	// Tail of /debug/pprof/heap?debug=1.
	profile := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1 0x2\n#\t0x1\tmain.f+0x1\t/x.go:1\n\n" +
		"# runtime.MemStats\n# Alloc = 21319584\n# Sys = 29391112\n# HeapInuse = 22347776\n# Stack = 557056 / 557056\n" +
		"# PauseNs = [0 0 0]\n# NumGC = 2\n# DebugGC = false\n")
	got := parseMemStats(profile)
	want := map[string]int64{"Alloc": 21319584, "Sys": 29391112, "HeapInuse": 22347776, "Stack": 557056, "NumGC": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParallel(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	err := parallel(context.Background(), 100, 7, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil || len(seen) != 100 {
		t.Fatalf("err %v, %d items done", err, len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("item %d done %d times", i, n)
		}
	}
	// With several workers the first error is returned; how many items
	// the others finish meanwhile depends on scheduling, so the early
	// stop is checked with one worker, where it is exact.
	failAt10 := func(done *atomic.Int64) func(int) error {
		return func(i int) error {
			done.Add(1)
			if i == 10 {
				return errors.New("item 10")
			}
			return nil
		}
	}
	var done atomic.Int64
	if err := parallel(context.Background(), 1000, 4, failAt10(&done)); err == nil || err.Error() != "item 10" {
		t.Errorf("4 workers: err %v; want item 10", err)
	}
	done.Store(0)
	if err := parallel(context.Background(), 1000, 1, failAt10(&done)); err == nil || err.Error() != "item 10" || done.Load() != 11 {
		t.Errorf("1 worker: err %v after %d items; want item 10 after 11", err, done.Load())
	}
	if err := parallel(context.Background(), 0, 4, func(int) error { return errors.New("called") }); err != nil {
		t.Errorf("no items: %v", err)
	}
}

func TestTenantWorld(t *testing.T) {
	w, err := newTenantWorld(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.serve(); err != nil {
		t.Fatal(err)
	}
	defer w.close()
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(w.base); code != http.StatusOK {
		t.Errorf("base URL: HTTP %d, want 200 (nats-server probes it)", code)
	}
	if code, _ := get(w.base + "ANOTTHERE"); code != http.StatusNotFound {
		t.Errorf("unknown account: HTTP %d", code)
	}
	for _, tn := range w.tenants {
		code, token := get(w.base + tn.pub)
		ac, err := jwt.DecodeAccountClaims(token)
		if code != http.StatusOK || err != nil {
			t.Fatalf("%s: HTTP %d, %v", tn.name, code, err)
		}
		if ac.Limits.JetStreamLimits != tenantJSLimits || !ac.Limits.IsJSEnabled() {
			t.Errorf("%s: JetStream limits %+v", tn.name, ac.Limits.JetStreamLimits)
		}
		uc, err := jwt.DecodeUserClaims(tn.userJWT)
		if err != nil || uc.Issuer != tn.pub {
			t.Errorf("%s: user issued by %q (%v)", tn.name, uc.Issuer, err)
		}
		if kp, err := nkeys.FromSeed([]byte(tn.userSeed)); err != nil {
			t.Errorf("%s: seed: %v", tn.name, err)
		} else if pub, _ := kp.PublicKey(); pub != uc.Subject {
			t.Errorf("%s: seed is not the user's", tn.name)
		}
	}
	code, token := get(w.base + w.sysPub)
	if sys, err := jwt.DecodeAccountClaims(token); code != http.StatusOK || err != nil || sys.Limits.IsJSEnabled() {
		t.Errorf("system account: HTTP %d, %v", code, err)
	}
	conf := w.natsServerTenantConf("/tmp/x")
	for _, want := range []string{"operator: \"" + w.opJWT + "\"", "system_account: \"" + w.sysPub + "\"",
		"resolver: URL(" + w.base + ")", "store_dir: \"/tmp/x\""} {
		if !strings.Contains(conf, want) {
			t.Errorf("nats-server config lacks %q:\n%s", want, conf)
		}
	}
}
