package server

import (
	"bytes"
	"fmt"
)

// Requests a tenant may make about its own account, as nats-server
// imports them into every account (`nats account report statistics` and
// `nats account report connections` ask them). The answer covers the
// requesting account only, whatever the request body names.
const (
	subjSelfStatz = "$SYS.REQ.ACCOUNT.PING.STATZ"
	subjSelfConnz = "$SYS.REQ.ACCOUNT.PING.CONNZ"
	// selfServiceSubs is how many internal subscriptions they add to
	// every tenant account.
	selfServiceSubs = 2
	// selfInFlight bounds the self-service requests one account has
	// being answered at once.
	selfInFlight = 4
)

// startSelfServices subscribes a tenant account's self-service requests;
// once per account, and not in the system account, which has the
// server-wide versions.
func (s *Server) startSelfServices(a *Account) {
	if a == s.sys {
		return
	}
	a.selfOnce.Do(func() {
		// A tenant's flood of requests must not become a flood of
		// goroutines building documents: at most selfInFlight at once per
		// account; beyond that a request goes unanswered, as one to a
		// busy server times out.
		busy := make(chan struct{}, selfInFlight)
		serve := func(subj string, build func(body []byte) (any, error)) {
			_, err := a.SubscribeInternal(subj, func(_, reply, _, msg []byte) {
				select {
				case busy <- struct{}{}:
				default:
					return
				}
				r, body := string(reply), bytes.Clone(msg)
				go func() {
					defer func() { <-busy }()
					s.zReplyIn(a, r, body, func() (any, error) { return build(body) })
				}()
			})
			if err != nil {
				s.log.Error("account self-service", "account", a.name, "subject", subj, "err", fmt.Errorf("subscribe: %w", err))
			}
		}
		serve(subjSelfStatz, func(body []byte) (any, error) { return s.accountStatzFor(body, a.name) })
		serve(subjSelfConnz, func(body []byte) (any, error) { return s.monitorDoc("CONNZ", body, a.name) })
	})
}
