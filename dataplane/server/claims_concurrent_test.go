package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/resolver"
)

// signAccountAt signs claims with the operator as issued at iat
// (jwt.Encode stamps the current second; the test needs an order).
func signAccountAt(t testing.TB, op nkeys.KeyPair, ac *jwt.AccountClaims, iat int64) string {
	t.Helper()
	iss, _ := op.PublicKey()
	c := *ac
	c.Issuer, c.IssuedAt, c.ID = iss, iat, fmt.Sprintf("jti-%d", iat)
	c.Type, c.Version = jwt.AccountClaim, 2
	enc := base64.RawURLEncoding
	body, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	signing := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519-nkey"}`)) + "." + enc.EncodeToString(body)
	sig, err := op.Sign([]byte(signing))
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

// TestConcurrentClaimUpdatesKeepNewest: pushes of one account's JWTs
// racing each other, in any order, leave the newest in use and on disk,
// for a loaded account and for one not loaded.
func TestConcurrentClaimUpdatesKeepNewest(t *testing.T) {
	dir := t.TempDir()
	res, err := resolver.New(resolver.Options{Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	op, s := newOperatorServer(t, res)
	const n = 24
	for _, loaded := range []bool{true, false} {
		t.Run(fmt.Sprintf("loaded=%v", loaded), func(t *testing.T) {
			kp, _ := nkeys.CreateAccount()
			pub, _ := kp.PublicKey()
			ac := jwt.NewAccountClaims(pub)
			tokens := make([]string, n)
			for i := range tokens {
				ac.Limits.Conn = int64(i + 1) // each JWT says which it is
				tokens[i] = signAccountAt(t, op, ac, int64(1_700_000_000+i))
			}
			var acc *Account
			if loaded {
				if err := res.Store(pub, tokens[0]); err != nil {
					t.Fatal(err)
				}
				if acc, err = s.LookupAccount(context.Background(), pub); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for _, i := range rand.Perm(n) {
				wg.Go(func() { s.UpdateAccountClaims(tokens[i], pub) }) // older ones may be refused
			}
			wg.Wait()
			if acc != nil {
				if got := acc.claims.Load(); got.Limits.Conn != n {
					t.Fatalf("in use: JWT %d of %d", got.Limits.Conn, n)
				}
			}
			// On disk: a resolver opened afresh on the directory.
			fresh, err := resolver.New(resolver.Options{Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			token, err := fresh.Fetch(context.Background(), pub)
			if err != nil {
				t.Fatal(err)
			}
			if token != tokens[n-1] {
				c, _ := jwt.DecodeAccountClaims(token)
				t.Fatalf("on disk: JWT %d of %d", c.Limits.Conn, n)
			}
		})
	}
}
