package main

import (
	"testing"
	"time"
)

func TestNoisyFigures(t *testing.T) {
	var l latencies
	for i := 100; i >= 1; i-- {
		l.lat = append(l.lat, time.Duration(i)*time.Millisecond)
	}
	if got := l.pct(0.5); got != 51*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := l.pct(0.99); got != 100*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := l.pct(1); got != 100*time.Millisecond {
		t.Errorf("max = %v", got)
	}
	if got := (&latencies{}).pct(0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
	for d, want := range map[time.Duration]string{
		36 * time.Microsecond: "36µs", 3100 * time.Microsecond: "3.1ms", 1870 * time.Millisecond: "1.87s",
	} {
		if got := fmtLatency(d); got != want {
			t.Errorf("fmtLatency(%v) = %q, want %q", d, got, want)
		}
	}
	for body, want := range map[string]int{
		`{"type":"io.nats.jetstream.api.v1.system_overloaded","error":{"code":503,"err_code":10023}}`: 10023,
		`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{}}`:                        0,
		`not json`: 0,
	} {
		if got := apiErrCode([]byte(body)); got != want {
			t.Errorf("apiErrCode(%s) = %d, want %d", body, got, want)
		}
	}
}
