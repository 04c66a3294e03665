package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestDigestIntervalFlag: the digest check's period reaches a clustered
// node's options, 0 turns it off, and a period under a second (a check
// that would hash every partition all the time) is refused.
func TestDigestIntervalFlag(t *testing.T) {
	cluster := []string{"--node-id", "n1", "--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:6222,n2=127.0.0.1:6223,n3=127.0.0.1:6224"}
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  string
	}{
		{nil, 5 * time.Minute, ""},
		{[]string{"--digest-interval", "30s"}, 30 * time.Second, ""},
		{[]string{"--digest-interval", "0"}, 0, ""},
		{[]string{"--digest-interval", "500ms"}, 0, "under a second"},
		{[]string{"--digest-interval", "-1s"}, 0, "under a second"},
	} {
		f, err := parseDataplaneFlags(append(append([]string(nil), cluster...), tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		opts, err := f.options()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := digestInterval(opts); got != tc.want {
			t.Errorf("%v: interval %v, want %v", tc.args, got, tc.want)
		}
	}
}
