package tenant

import (
	"testing"
	"time"
)

// FuzzJWT feeds arbitrary text to the JWT checks a node runs on what
// clients and resolvers send: they must fail cleanly, never panic, and
// never accept what the trusted operator did not sign.
func FuzzJWT(f *testing.F) {
	w := newWorld(f, DefaultLimits())
	u, err := IssueUser(w.accSeed, UserSpec{Name: "seed"})
	if err != nil {
		f.Fatal(err)
	}
	token, _, _ := ParseCreds(u.Creds)
	f.Add(token)
	f.Add(w.accJWT)
	f.Add(w.op.JWT())
	f.Add("eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.AAAA")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, s string) {
		if ac, err := w.trust.VerifyAccount(s, "", time.Now()); err == nil && ac.Subject != w.accPub {
			t.Fatalf("verified an account the operator never signed: %s", ac.Subject)
		}
		if uc, acct, err := DecodeUser(s); err == nil {
			ac, _ := w.trust.VerifyAccount(w.accJWT, w.accPub, time.Now())
			if acct == w.accPub {
				_ = CheckUser(ac, uc, []byte("nonce"), "AAAA", time.Now())
			}
		}
		_, _, _ = ParseCreds([]byte(s))
		_, _ = NewTrust([]byte(s))
	})
}
