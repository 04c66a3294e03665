package main

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/server"
)

// Accounts across a cluster in operator mode. A request of an account
// reaches only the nodes that have the account loaded (routes carry
// interest per account, and a node without the account has none), so
// the meta leader and the node leading a stream must have it even when
// none of the account's clients is connected to them. Two things see to
// it:
//
//   - the engine asks for every account its catalog names, and for the
//     accounts of the streams it must serve (jetstream Options.LoadAccount,
//     wired to loadAccount);
//   - when a node registers an account for the first time, it asks every
//     node it has a route to to load it too, and waits (boundedly) for
//     their answers before the load that brought it (a client's CONNECT)
//     returns, so the client's first API request finds the account on
//     every node.

// Subjects of the load requests, in the system account. They are the
// cluster's own: nats-server has no counterpart.
const (
	subjAccountLoad      = "$CONTRAIL.ACCOUNT.%s.LOAD" // %s: the account key
	subjAccountLoadAny   = "$CONTRAIL.ACCOUNT.*.LOAD"
	subjAccountLoadReply = "$CONTRAIL.ACCOUNT.LOADED." // + node + "." + request id
)

// spreadTimeout bounds the wait for the other nodes to load an account.
const spreadTimeout = 2 * time.Second

// loadAccount is the engine's LoadAccount hook: the server loads the
// account through its resolver, which ends in AccountReady and so in
// RegisterAccount.
func loadAccount(srv *server.Server, log *slog.Logger) func(string) {
	return func(name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := srv.LookupAccount(ctx, name); err != nil {
			log.Warn("account needed by jetstream not loaded", "account", name, "err", err)
		}
	}
}

// accountSpread asks the other nodes to load the accounts this node
// loads, and loads those they ask for.
type accountSpread struct {
	srv   *server.Server
	sys   *server.Account
	hooks *accountHooks
	log   *slog.Logger
	seq   atomic.Uint64

	mu struct {
		sync.Mutex
		// waits holds, by request id, the channel each answer (the
		// answering node's name) is sent on. Guarded by mu.
		waits map[string]chan string
		// onBehalf counts, by account, the loads run at another node's
		// request: those are not spread again. Guarded by mu.
		onBehalf map[string]int
	}
}

// startAccountSpread subscribes the load service and its replies in the
// system account.
func startAccountSpread(srv *server.Server, hooks *accountHooks, log *slog.Logger) (*accountSpread, error) {
	sp := &accountSpread{srv: srv, sys: srv.SystemAccount(), hooks: hooks, log: log}
	sp.mu.waits = map[string]chan string{}
	sp.mu.onBehalf = map[string]int{}
	if _, err := sp.sys.SubscribeInternal(subjAccountLoadAny, sp.onLoad); err != nil {
		return nil, err
	}
	if _, err := sp.sys.SubscribeInternal(sp.replyPrefix()+"*", sp.onReply); err != nil {
		return nil, err
	}
	return sp, nil
}

// replyPrefix starts the reply subject of this node's load requests
// (a request id follows): what it subscribes to for answers, and how it
// knows its own request when that reaches its own load service.
func (sp *accountSpread) replyPrefix() string {
	return subjAccountLoadReply + sp.srv.Name() + "."
}

// onLoad serves a peer's request to load an account.
func (sp *accountSpread) onLoad(subject, reply, _, _ []byte) {
	parts := strings.Split(string(subject), ".")
	if len(parts) != 4 {
		return
	}
	name, to := parts[2], string(reply)
	if strings.HasPrefix(to, sp.replyPrefix()) {
		// This node's own request, delivered to its own subscription:
		// answering it would count as a peer's answer, and spread
		// would stop waiting one peer early.
		return
	}
	go func() {
		if !sp.hooks.isRegistered(name) {
			sp.mu.Lock()
			sp.mu.onBehalf[name]++
			sp.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), spreadTimeout)
			if _, err := sp.srv.LookupAccount(ctx, name); err != nil {
				sp.log.Warn("account a peer loaded not loaded here", "account", name, "err", err)
			}
			cancel()
			sp.mu.Lock()
			if sp.mu.onBehalf[name]--; sp.mu.onBehalf[name] <= 0 {
				delete(sp.mu.onBehalf, name)
			}
			sp.mu.Unlock()
		}
		if to != "" {
			// The answer names this node, so an answer that arrives
			// twice is counted once.
			sp.sys.Publish(to, "", nil, []byte(sp.srv.Name()))
		}
	}()
}

// onReply passes a peer's answer to one of this node's load requests to
// the spread waiting for it.
func (sp *accountSpread) onReply(subject, _, _, msg []byte) {
	id := subject[bytes.LastIndexByte(subject, '.')+1:]
	sp.mu.Lock()
	ch := sp.mu.waits[string(id)]
	sp.mu.Unlock()
	if ch != nil {
		select {
		case ch <- string(msg):
		default:
		}
	}
}

// spread asks every node with a route to this one to load the account,
// and waits until each has answered or spreadTimeout passed. A load made
// at a peer's request is not spread again: the peer asked everyone.
func (sp *accountSpread) spread(name string) {
	sp.mu.Lock()
	behalf := sp.mu.onBehalf[name] > 0
	sp.mu.Unlock()
	peers := len(sp.srv.Routes())
	if behalf || peers == 0 || name == sp.sys.Name() {
		return
	}
	id := strconv.FormatUint(sp.seq.Add(1), 10)
	ch := make(chan string, 2*peers) // room for a duplicate of each
	sp.mu.Lock()
	sp.mu.waits[id] = ch
	sp.mu.Unlock()
	defer func() {
		sp.mu.Lock()
		delete(sp.mu.waits, id)
		sp.mu.Unlock()
	}()
	sp.sys.Publish(strings.Replace(subjAccountLoad, "%s", name, 1), sp.replyPrefix()+id, nil, nil)
	timer := time.NewTimer(spreadTimeout)
	defer timer.Stop()
	if got := awaitPeers(ch, peers, timer.C); got < peers {
		sp.log.Warn("peers did not confirm loading an account in time", "account", name, "answers", got, "peers", peers)
	}
}

// awaitPeers counts the answers on ch until peers distinct nodes have
// answered or timeout fires, and returns how many did. An answer names
// its node: the same node's answer arriving twice (over two routes while
// they are being set up) would otherwise end the wait one peer early,
// and the client's first request could reach a node that has not loaded
// its account. An empty name (a node of an older build) counts each time.
func awaitPeers(ch <-chan string, peers int, timeout <-chan time.Time) int {
	seen := make(map[string]bool, peers)
	got := 0
	for got < peers {
		select {
		case node := <-ch:
			if node != "" {
				if seen[node] {
					continue
				}
				seen[node] = true
			}
			got++
		case <-timeout:
			return got
		}
	}
	return got
}
