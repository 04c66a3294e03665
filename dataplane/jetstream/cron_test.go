package jetstream

import (
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cases := []struct {
		pattern string
		loc     *time.Location
		from    string
		want    string
	}{
		{"0 0 0 1 1 *", nil, "2026-03-01T10:00:00Z", "2027-01-01T00:00:00Z"},
		{"@yearly", nil, "2026-03-01T10:00:00Z", "2027-01-01T00:00:00Z"},
		{"@hourly", nil, "2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"},
		{"*/15 * * * * *", nil, "2026-03-01T12:00:07Z", "2026-03-01T12:00:15Z"},
		{"* * * * * *", nil, "2026-03-01T12:00:07Z", "2026-03-01T12:00:08Z"},
		{"5/20 * * * * ?", nil, "2026-03-01T12:00:46Z", "2026-03-01T12:01:05Z"},
		{"0 30 9 * * mon-fri", nil, "2026-12-05T10:00:00Z", "2026-12-07T09:30:00Z"}, // a Saturday
		{"0 0 0 13 * 5", nil, "2026-02-01T00:00:00Z", "2026-02-06T00:00:00Z"},       // a Friday comes before the 13th
		{"0 0 0 13 * *", nil, "2026-02-01T00:00:00Z", "2026-02-13T00:00:00Z"},
		{"0 0 0 29 feb *", nil, "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 0 9 * * *", ny, "2026-12-02T00:00:00Z", "2026-12-02T14:00:00Z"},
		{"0 0,30 8-9 * * *", nil, "2026-12-02T08:45:00Z", "2026-12-02T09:00:00Z"},
	}
	for _, tc := range cases {
		spec, ok := parseCronSpec(tc.pattern)
		if !ok {
			t.Errorf("%q refused", tc.pattern)
			continue
		}
		loc := tc.loc
		if loc == nil {
			loc = time.UTC
		}
		got, ok := spec.next(utc(tc.from), loc)
		if !ok || !got.Equal(utc(tc.want)) {
			t.Errorf("%q from %s: %v %v, want %s", tc.pattern, tc.from, got.UTC(), ok, tc.want)
		}
	}
	for _, bad := range []string{"* * * * *", "60 * * * * *", "*/0 * * * * *", "a * * * * *", "1-2-3 * * * * *",
		"0 0 0 32 * *", "0 0 0 * 13 *", "5-1 * * * * *", "0 0 0 30 feb *", "@every", "1//2 * * * * *"} {
		spec, ok := parseCronSpec(bad)
		if ok {
			if _, found := spec.next(utc("2026-01-01T00:00:00Z"), time.UTC); found {
				t.Errorf("%q accepted", bad)
			}
		}
	}
}
