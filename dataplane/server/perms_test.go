package server

import (
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

func TestPermissions(t *testing.T) {
	var p jwt.Permissions
	p.Pub.Allow.Add("orders.>", "status")
	p.Pub.Deny.Add("orders.secret.*")
	p.Sub.Allow.Add("events.>", "jobs.* workers")
	p.Sub.Deny.Add("events.private")
	perms := newPermissions(p)
	now := time.Now()
	for subj, want := range map[string]bool{
		"orders.1": true, "orders.a.b": true, "status": true,
		"orders.secret.x": false, "billing": false, "status.x": false,
	} {
		// Twice: the second answer comes from the cache.
		for range 2 {
			if got := perms.canPublish(subj, now); got != want {
				t.Errorf("publish %q: %v, want %v", subj, got, want)
			}
		}
	}
	for _, c := range []struct {
		filter, queue string
		want          bool
	}{
		{"events.>", "", true},
		{"events.a.*", "", true},
		{"events.private", "", false},
		{">", "", false},
		{"jobs.1", "workers", true},
		{"jobs.1", "", false},
		{"jobs.1", "others", false},
	} {
		if got := perms.canSubscribe(c.filter, c.queue); got != c.want {
			t.Errorf("subscribe %q queue %q: %v, want %v", c.filter, c.queue, got, c.want)
		}
	}
	if !perms.deliverDenied("events.private") || perms.deliverDenied("events.public") {
		t.Error("deliverDenied")
	}
	if newPermissions(jwt.Permissions{}) != nil {
		t.Error("empty permissions should compile to nil (no checks)")
	}
}

func TestAllowResponses(t *testing.T) {
	var p jwt.Permissions
	p.Resp = &jwt.ResponsePermission{MaxMsgs: 2, Expires: time.Minute}
	perms := newPermissions(p)
	now := time.Now()
	if perms.canPublish("_INBOX.x", now) {
		t.Fatal("allow_responses alone lets only replies through")
	}
	perms.openReply("_INBOX.x", now)
	for i, want := range []bool{true, true, false} {
		if got := perms.canPublish("_INBOX.x", now); got != want {
			t.Fatalf("reply %d: allowed %v, want %v (max 2)", i+1, got, want)
		}
	}
	perms.openReply("_INBOX.y", now)
	if perms.canPublish("_INBOX.y", now.Add(2*time.Minute)) {
		t.Fatal("an expired reply permission was used")
	}
}

func TestAllowedTime(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, time.UTC) }
	day := []jwt.TimeRange{{Start: "09:00:00", End: "17:00:00"}}
	night := []jwt.TimeRange{{Start: "22:00:00", End: "06:00:00"}}
	if end, err := allowedTime(day, "UTC", at(12, 0)); err != nil || !end.Equal(at(17, 0)) {
		t.Fatalf("noon: %v %v", end, err)
	}
	if _, err := allowedTime(day, "UTC", at(18, 0)); err == nil {
		t.Fatal("18:00 allowed in a 9-17 range")
	}
	if end, err := allowedTime(night, "UTC", at(23, 0)); err != nil || !end.Equal(at(6, 0).Add(24*time.Hour)) {
		t.Fatalf("23:00 over midnight: %v %v", end, err)
	}
	if end, err := allowedTime(night, "UTC", at(5, 0)); err != nil || !end.Equal(at(6, 0)) {
		t.Fatalf("05:00 over midnight: %v %v", end, err)
	}
	if _, err := allowedTime(night, "UTC", at(12, 0)); err == nil {
		t.Fatal("noon allowed in a night range")
	}
	if _, err := allowedTime(day, "Not/AZone", at(12, 0)); err == nil {
		t.Fatal("a bad locale was accepted")
	}
}

func TestAllowedSource(t *testing.T) {
	src := jwt.CIDRList{}
	src.Add("10.0.0.0/8", "192.168.1.7")
	for host, want := range map[string]bool{"10.2.3.4": true, "192.168.1.7": true, "192.168.1.8": false, "127.0.0.1": false} {
		if got := allowedSource(src, host) == nil; got != want {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
	if allowedSource(nil, "1.2.3.4") != nil {
		t.Error("no list must allow all")
	}
}
