package api

import (
	"testing"
	"time"
)

func TestSourceIndexName(t *testing.T) {
	for _, c := range []struct {
		src  StreamSource
		want string
	}{
		{StreamSource{Name: "O"}, "O > >"},
		{StreamSource{Name: "O", FilterSubject: "a.*"}, "O a.* >"},
		{StreamSource{Name: "O", SubjectTransforms: []SubjectTransform{{Source: "a.*", Destination: "b.$1"}, {Source: "c"}}}, "O a.*\fc b.$1\f>"},
		// nats-server's getHash of "JS.A.API", as its headers show.
		{StreamSource{Name: "O", External: &ExternalStream{APIPrefix: "JS.A.API"}, FilterSubject: "o.1"}, "O:3V17LQ3b o.1 >"},
	} {
		if got := c.src.IndexName(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.src, got, c.want)
		}
	}
	if id := StreamIdentity(time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)); len(id) != 8 {
		t.Errorf("identity %q", id)
	}
}
