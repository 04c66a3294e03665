package main

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
