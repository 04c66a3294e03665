package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// opWorld is an operator with its accounts, made as nsc makes them, and
// a URL resolver serving their JWTs from the test process.
type opWorld struct {
	t        testing.TB
	op       nkeys.KeyPair
	opPub    string
	opJWT    string
	sys      *opAccount
	resolver *httptest.Server
	down     atomic.Bool // the resolver answers 503 while set
	// slow delays the answers to the node of each index (see
	// nodeArgsAt), in nanoseconds.
	slow [3]atomic.Int64

	mu   sync.Mutex
	jwts map[string]string // account key → JWT; guarded by mu
}

// opAccount is one account: its key pair and current claims.
type opAccount struct {
	w      *opWorld
	kp     nkeys.KeyPair
	pub    string
	claims *jwt.AccountClaims
}

func newOpWorld(t testing.TB) *opWorld {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	pub, _ := op.PublicKey()
	w := &opWorld{t: t, op: op, opPub: pub, jwts: map[string]string{}}
	w.sys = w.account("SYS", nil)
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = "TEST-OP"
	oc.SystemAccount = w.sys.pub
	var err error
	if w.opJWT, err = oc.Encode(op); err != nil {
		t.Fatal(err)
	}
	w.resolver = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			http.Error(rw, "down", http.StatusServiceUnavailable)
			return
		}
		path := r.URL.Path
		if rest, ok := strings.CutPrefix(path, "/node"); ok && len(rest) > 0 && rest[0] >= '0' && int(rest[0]-'0') < len(w.slow) {
			time.Sleep(time.Duration(w.slow[rest[0]-'0'].Load()))
			path = rest[1:]
		}
		key := strings.TrimPrefix(path, "/jwt/v1/accounts/")
		w.mu.Lock()
		token, ok := w.jwts[key]
		w.mu.Unlock()
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Write([]byte(token))
	}))
	t.Cleanup(w.resolver.Close)
	return w
}

// jsLimits are JetStream limits for tests: generous unless changed.
func jsLimits() jwt.JetStreamLimits {
	return jwt.JetStreamLimits{MemoryStorage: 64 << 20, DiskStorage: 256 << 20, Streams: -1, Consumer: -1}
}

// account creates an account; edit, when given, changes its claims
// before they are signed and published on the resolver.
func (w *opWorld) account(name string, edit func(*jwt.AccountClaims)) *opAccount {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	a := &opAccount{w: w, kp: kp, pub: pub, claims: ac}
	if edit != nil {
		edit(ac)
	}
	w.publish(a)
	return a
}

// sign encodes the account's current claims with the operator.
func (a *opAccount) sign() string {
	a.claims.IssuedAt = 0 // Encode stamps the current time
	token, err := a.claims.Encode(a.w.op)
	if err != nil {
		a.w.t.Fatal(err)
	}
	return token
}

// publish puts the account's current JWT on the resolver.
func (w *opWorld) publish(a *opAccount) string {
	token := a.sign()
	w.mu.Lock()
	w.jwts[a.pub] = token
	w.mu.Unlock()
	return token
}

// user issues a user of the account and writes its creds file.
func (a *opAccount) user(name string, edit func(*jwt.UserClaims)) (credsPath string, upub string) {
	t := a.w.t
	ukp, _ := nkeys.CreateUser()
	upub, _ = ukp.PublicKey()
	seed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	if edit != nil {
		edit(uc)
	}
	token, err := uc.Encode(a.kp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, upub
}

// nodeArgs are the flags that make a node trust the world's operator.
func (w *opWorld) nodeArgs(dir string) []string {
	return w.nodeArgsVia(dir, w.resolver.URL+"/jwt/v1/accounts/")
}

// nodeArgsAt is nodeArgs for node i of a cluster, which fetches from a
// resolver path of its own, so a test can make one node's fetches slow
// (w.slow[i]).
func (w *opWorld) nodeArgsAt(dir string, i int) []string {
	return w.nodeArgsVia(dir, fmt.Sprintf("%s/node%d/jwt/v1/accounts/", w.resolver.URL, i))
}

func (w *opWorld) nodeArgsVia(dir, resolverURL string) []string {
	opFile := filepath.Join(dir, "operator.jwt")
	if err := os.WriteFile(opFile, []byte(w.opJWT), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return []string{"--operator", opFile, "--resolver", resolverURL, "--system-account", w.sys.pub}
}

// startOpNode starts a node in operator mode for w.
func (w *opWorld) startOpNode(t testing.TB) *node {
	dir := t.TempDir()
	return startNode(t, nodeOpts{dir: dir, args: w.nodeArgs(dir)})
}

// dialCreds connects with a creds file, reporting async errors on errs.
func dialCreds(url, creds string, errs chan<- error, opts ...nats.Option) (*nats.Conn, error) {
	o := append([]nats.Option{nats.UserCredentials(creds), nats.MaxReconnects(0),
		nats.Timeout(5 * time.Second)}, opts...)
	if errs != nil {
		o = append(o, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	}
	return nats.Connect(url, o...)
}

// connectCreds connects with a creds file or fails the test.
func connectCreds(t testing.TB, url, creds string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := dialCreds(url, creds, nil, opts...)
	if err != nil {
		t.Fatalf("connect with %s: %v", filepath.Base(creds), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// pushClaims sends the account's current JWT to the node as the system
// account does, and checks the node accepted it.
func (w *opWorld) pushClaims(t testing.TB, sysConn *nats.Conn, a *opAccount) {
	t.Helper()
	token := w.publish(a)
	msg, err := sysConn.Request("$SYS.REQ.ACCOUNT."+a.pub+".CLAIMS.UPDATE", []byte(token), 5*time.Second)
	if err != nil {
		t.Fatalf("claims update: %v", err)
	}
	if !strings.Contains(string(msg.Data), `"code":200`) {
		t.Fatalf("claims update refused: %s", msg.Data)
	}
}

// mustRead reads a file or fails the test.
func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// memResolverConf is the configuration `nsc generate config
// --mem-resolver` writes for the world: the operator, the system account
// and every account JWT the resolver serves now, preloaded.
func (w *opWorld) memResolverConf() string {
	var conf strings.Builder
	conf.WriteString("operator: " + w.opJWT + "\nsystem_account: " + w.sys.pub + "\nresolver: MEMORY\nresolver_preload: {\n")
	w.mu.Lock()
	for key, token := range w.jwts {
		conf.WriteString("  " + key + ": " + token + "\n")
	}
	w.mu.Unlock()
	conf.WriteString("}\n")
	return conf.String()
}

// startRef starts nats-server as the reference for the world's accounts
// as they are now (memResolverConf), with JetStream on.
func (w *opWorld) startRef(t testing.TB) *refServer {
	t.Helper()
	dir := t.TempDir()
	conf := w.memResolverConf() + "jetstream { store_dir: \"" + filepath.Join(dir, "js") + "\" }\n"
	return startNatsServer(t, "-c", writeFile(t, dir, "ref.conf", conf))
}
