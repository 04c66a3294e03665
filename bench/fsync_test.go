package main

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFsyncProbe(t *testing.T) {
	dir := t.TempDir()
	for _, gap := range []time.Duration{0, fsyncIdleGap} {
		lat, err := fsyncProbe(dir, 20, gap)
		if err != nil {
			t.Fatal(err)
		}
		if len(lat) != 20 {
			t.Fatalf("gap %v: got %d samples, want 20", gap, len(lat))
		}
		for i, v := range lat {
			if !(v > 0) || (i > 0 && v < lat[i-1]) {
				t.Fatalf("gap %v: samples not positive and sorted: %v", gap, lat)
			}
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("probe left %d file(s) behind", len(left))
	}
	if busy, idle, err := fsyncP50(dir); err != nil || !(busy > 0) || !(idle > 0) {
		t.Errorf("fsyncP50 = %v, %v, %v", busy, idle, err)
	}
	if _, err := fsyncProbe(dir+"/missing", 1, 0); err == nil {
		t.Error("missing dir: want error")
	}
}

func TestPercentile(t *testing.T) {
	vs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0: 1, 0.5: 5, 0.9: 9, 0.99: 10, 1: 10} {
		if got := percentile(vs, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("no values: want NaN")
	}
}

func TestWithClients(t *testing.T) {
	byName := map[string]Workload{}
	for _, w := range workloads {
		byName[w.Name] = w
	}
	for _, name := range []string{"js pub sync", "kv put"} {
		if !byName[name].Sync {
			t.Errorf("%s is not a Sync workload", name)
		}
	}
	w := byName["js pub sync"]
	orig := slices.Clone(w.Main)
	if got := w.withClients(1); !reflect.DeepEqual(got, w) {
		t.Errorf("one client changed the workload: %+v", got)
	}
	got := w.withClients(16)
	if got.Name != "js pub sync x16" || !reflect.DeepEqual(got.Main, append(slices.Clone(orig), "--clients", "16")) {
		t.Errorf("16 clients: %q %v", got.Name, got.Main)
	}
	if !reflect.DeepEqual(w.Main, orig) || !reflect.DeepEqual(byName["js pub sync"].Main, orig) {
		t.Error("withClients changed the table's command line")
	}
	if a := byName["js pub async"]; !reflect.DeepEqual(a.withClients(16), a) {
		t.Error("a workload that is not Sync took -clients")
	}
}

func TestSyncRows(t *testing.T) {
	w := Workload{Name: "js pub sync", Latency: true, Sync: true}
	mk := func(clients int, c, n []float64) *result {
		return &result{w: w, clients: clients, fsync: []float64{250, 200, 300}, fsyncIdle: []float64{290, 280, 310}, errs: map[string]error{},
			rounds: map[string][][]float64{sideContrail: {c}, sideNatsServer: {n}}}
	}
	// One client: target = fsync p50 250 + nats-server p50 60 + 50 = 360.
	var out bytes.Buffer
	printTable(&out, []*result{mk(1, []float64{2000, 350}, []float64{9000, 60})}, 1)
	for _, want := range []string{"fsync p50 (us) 250.0", "fsync p50 idle (us) 290.0", "p50 target (us) 360.0 meets", "fsync p50: write+fdatasync"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if m, target, meets, ok := mk(1, []float64{2000, 361}, []float64{9000, 60}).syncTarget(); m != "p50 target (us)" || target != 360 || meets || !ok {
		t.Errorf("361 µs against 360: %q %v %v %v", m, target, meets, ok)
	}
	// More clients: the target is nats-server's msgs/s.
	if m, target, meets, ok := mk(16, []float64{9500, 900}, []float64{9000, 500}).syncTarget(); m != "msgs/s target" || target != 9000 || !meets || !ok {
		t.Errorf("16 clients: %q %v %v %v", m, target, meets, ok)
	}
	// A failed side has no verdict.
	r := mk(1, []float64{2000, 350}, []float64{9000, 60})
	r.errs[sideContrail] = os.ErrClosed
	if rows := syncRows(r); rows[len(rows)-1][4] != "-" {
		t.Errorf("failed side: verdict %q", rows[len(rows)-1][4])
	}
	// No nats-server figures: no target.
	r = mk(1, []float64{2000, 350}, nil)
	r.rounds[sideNatsServer] = nil
	if _, _, _, ok := r.syncTarget(); ok {
		t.Error("no nats-server rounds: want no target")
	}
}
