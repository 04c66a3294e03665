package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/tenant"
)

// ErrNoJetStream means the account's cell has no JetStream for it (its
// limits turn JetStream off): nobody answers its $JS.API requests.
var ErrNoJetStream = errors.New("jetstream is not enabled for the account")

// ErrAccountRefused means the cell refused a connection made as the
// account, typically because the account is at its connection limit.
var ErrAccountRefused = errors.New("the cell refused a connection as the account")

// managementUser is the name of the short-lived users the control plane
// signs to act on an account's streams; `nats server report connections`
// shows it.
const managementUser = "contrail-controlplane"

// managementTTL is how long such a user's JWT is valid: long enough for
// one request, short enough that a leaked one is soon useless.
const managementTTL = time.Minute

// JetStream sends one JetStream API request (subject under $JS.API.) to
// the account's cell as the account itself, with a user the control plane
// signs with the account's seed for this request, and returns the reply.
// Acting as the account, not the system account, means the cell applies
// the account's own limits and sees the change as the account's, exactly
// as if its owner had made it with a stock client. The connection counts
// against the account's max_connections while the request runs.
func (c *Cells) JetStream(ctx context.Context, cell string, accountSeed []byte, subject string, body []byte) ([]byte, error) {
	url, ok := c.urls[cell]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCell, cell)
	}
	if !strings.HasPrefix(subject, "$JS.API.") {
		return nil, fmt.Errorf("jetstream request %q: not a $JS.API subject", subject)
	}
	inbox := "_INBOX_" + nats.NewInbox()[len("_INBOX."):]
	user, err := tenant.IssueUser(accountSeed, tenant.UserSpec{
		Name: managementUser,
		Permissions: tenant.Permissions{
			Publish:   tenant.Permission{Allow: []string{"$JS.API.>"}},
			Subscribe: tenant.Permission{Allow: []string{inbox + ".>"}},
		},
		Expires: time.Now().Add(managementTTL),
	})
	if err != nil {
		return nil, err
	}
	token, kp, err := tenant.ParseCreds(user.Creds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	nc, err := nats.Connect(url, nats.Name(managementUser), nats.CustomInboxPrefix(inbox),
		nats.UserJWT(func() (string, error) { return token, nil }, kp.Sign),
		nats.Timeout(time.Until(deadline)), nats.NoReconnect())
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrMaxConnectionsExceeded) ||
			errors.Is(err, nats.ErrAccountAuthExpired) || strings.Contains(strings.ToLower(err.Error()), "maximum") {
			return nil, fmt.Errorf("%w: %s: %v", ErrAccountRefused, cell, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrCellUnavailable, cell, err)
	}
	defer nc.Close()
	msg, err := nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%s: %w", cell, ErrNoJetStream)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %v", ErrCellUnavailable, cell, subject, err)
	}
	return msg.Data, nil
}
