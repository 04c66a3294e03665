package server

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"slices"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/contrail/contrail/dataplane/config"
)

func TestRedactConnect(t *testing.T) {
	in := `CONNECT {"verbose":false,"user":"u","pass":"p\"w","auth_token":"tok","name":"pass"}`
	want := `CONNECT {"verbose":false,"user":"u","pass":"[REDACTED]","auth_token":"[REDACTED]","name":"pass"}`
	if got := string(redactConnect([]byte(in))); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestStaticPasswords(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), 4)
	for _, u := range []*staticUser{newStaticUser(config.User{Name: "plain", Password: "s3cret"}, nil, nil), newStaticUser(config.User{Name: "hashed", Password: string(hash)}, nil, nil)} {
		if err := u.checkPassword("s3cret"); err != nil {
			t.Errorf("%s: right password refused: %v", u.name, err)
		}
		for _, wrong := range []string{"", "s3cre", "s3cret ", string(hash)} {
			if err := u.checkPassword(wrong); !errors.Is(err, errBadPassword) {
				t.Errorf("%s: password %q: %v", u.name, wrong, err)
			}
		}
	}
}

func TestCertIdentities(t *testing.T) {
	cert := &x509.Certificate{
		Subject:        pkix.Name{CommonName: "alice", Organization: []string{"Acme"}},
		EmailAddresses: []string{"alice@example.com"},
		DNSNames:       []string{"alice.example.com"},
	}
	ids := certIdentities(cert)
	for _, want := range []string{"alice@example.com", "alice.example.com", "CN=alice,O=Acme", "O=Acme,CN=alice", "O=Acme, CN=alice"} {
		if !slices.Contains(ids, want) {
			t.Errorf("%q not among %q", want, ids)
		}
	}
}
