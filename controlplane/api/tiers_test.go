package api

import (
	"net/http"
	"testing"

	"github.com/nats-io/jwt/v2"
)

// Tiered limits reach the account JWT as its R1 and R3 tiers, in place of
// the untiered ones; PATCH with tiers null goes back to untiered limits.
func TestAccountTieredLimits(t *testing.T) {
	a := newTestAPI(t)
	tok, p := a.person("tia@example.com")
	acc := a.createAccount(tok, `{"name":"r3","limits":{"jetstream":{"tiers":{`+
		`"R1":{"max_memory":1024,"max_storage":4096,"max_streams":-1,"max_consumers":-1,"max_ack_pending":-1,"max_stream_bytes":-1},`+
		`"R3":{"max_memory":0,"max_storage":8192,"max_streams":2,"max_consumers":5,"max_ack_pending":100,"max_stream_bytes":2048}}}}}`)
	if acc.Limits.JetStream.Tiers == nil || acc.Limits.JetStream.Tiers.R3 == nil || acc.Limits.JetStream.Tiers.R3.MaxStreams != 2 {
		t.Fatalf("created %+v", acc.Limits.JetStream)
	}
	claims := func() *jwt.AccountClaims {
		rec, err := a.repo.Account(p.OrgID, acc.ID)
		if err != nil {
			t.Fatal(err)
		}
		ac, err := jwt.DecodeAccountClaims(rec.JWT)
		if err != nil {
			t.Fatal(err)
		}
		return ac
	}
	ac := claims()
	r3, r1 := ac.Limits.JetStreamTieredLimits["R3"], ac.Limits.JetStreamTieredLimits["R1"]
	if len(ac.Limits.JetStreamTieredLimits) != 2 || ac.Limits.JetStreamLimits != (jwt.JetStreamLimits{}) ||
		r3.DiskStorage != 8192 || r3.Streams != 2 || r3.Consumer != 5 || r3.MaxAckPending != 100 || r3.DiskMaxStreamBytes != 2048 ||
		r1.MemoryStorage != 1024 || r1.DiskMaxStreamBytes != 0 || r1.MaxAckPending != 0 {
		t.Fatalf("jwt limits %+v tiers %+v", ac.Limits.JetStreamLimits, ac.Limits.JetStreamTieredLimits)
	}
	var got accountView
	a.ok("PATCH", "/v1/accounts/"+acc.ID, tok, `{"limits":{"jetstream":{"tiers":null}}}`, http.StatusOK, &got)
	if got.Limits.JetStream.Tiers != nil {
		t.Fatalf("after PATCH %+v", got.Limits.JetStream)
	}
	if ac := claims(); len(ac.Limits.JetStreamTieredLimits) != 0 || ac.Limits.JetStreamLimits.DiskStorage == 0 {
		t.Fatalf("after PATCH: jwt limits %+v tiers %+v", ac.Limits.JetStreamLimits, ac.Limits.JetStreamTieredLimits)
	}
}
