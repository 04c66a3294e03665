package jetstream

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

func TestSubjectTransformAndRepublish(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{
		Name:             "T",
		Subjects:         []string{"in.*.*"},
		SubjectTransform: &api.SubjectTransform{Source: "in.*.*", Destination: "stored.$2.$1"},
		RePublish:        &api.RePublish{Source: "stored.>", Destination: "out.>"},
	})
	out := inbox(t, acc, "out.>")
	ack := publish(t, acc, "in.a.b", nil, []byte("x"))
	if ack.Error != nil || ack.Sequence != 1 {
		t.Fatalf("ack %+v", ack)
	}
	var get api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET.T", api.MsgGetRequest{Seq: 1}, &get)
	if get.Error != nil || get.Message.Subject != "stored.b.a" {
		t.Fatalf("stored under %+v", get.Message)
	}
	d := next(t, out)
	if d.subject != "out.b.a" || d.data != "x" || !strings.Contains(d.hdr, "Nats-Sequence: 1") ||
		!strings.Contains(d.hdr, "Nats-Subject: stored.b.a") || !strings.Contains(d.hdr, "Nats-Stream: T") {
		t.Fatalf("republished %+v", d)
	}
}
