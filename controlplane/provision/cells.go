package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/tenant"
)

// ErrCellUnavailable means a cell did not answer in time: it is down,
// unreachable, or not yet connected. Callers answer 503.
var ErrCellUnavailable = errors.New("cell unavailable")

// ErrUnknownCell names a cell that is not configured.
var ErrUnknownCell = errors.New("unknown cell")

// ErrRejected means a cell refused a pushed account JWT.
var ErrRejected = errors.New("cell rejected the account jwt")

// Cell is a data-plane cluster the control plane provisions accounts on.
// NatsURL lists the cluster's nodes, comma-separated, as NATS clients take
// them; one node's URL is enough (the others are learnt from it), several
// keep the control plane connected while one node is down.
type Cell struct {
	Name    string `json:"name"`
	NatsURL string `json:"nats_url"`
}

// multiRequester is a cell connection that gathers the answers of every
// node of a clustered cell to one request.
type multiRequester interface {
	RequestAll(ctx context.Context, subject string, data []byte) ([]*nats.Msg, error)
}

// straggle is how long the other nodes' answers are awaited after the
// first: every node answers a system request about an account for what
// it holds, at about the same time.
const straggle = 250 * time.Millisecond

// natsCell is a real cell connection, made in the background: a node
// admits the control plane's system user only after fetching the system
// account from the control plane's own resolver, which serves once Open
// has returned, so Dial cannot wait for the first attempt.
type natsCell struct {
	nc     atomic.Pointer[nats.Conn]
	closed atomic.Bool
}

// set installs the connection nats.Connect returned.
func (c *natsCell) set(nc *nats.Conn) {
	c.nc.Store(nc)
	if c.closed.Load() {
		nc.Close() // closed while connecting
	}
}

func (c *natsCell) IsConnected() bool {
	nc := c.nc.Load()
	return nc != nil && nc.IsConnected()
}

func (c *natsCell) RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	nc := c.nc.Load()
	if nc == nil {
		return nil, nats.ErrConnectionReconnecting
	}
	return nc.RequestWithContext(ctx, subject, data)
}

func (c *natsCell) Close() {
	c.closed.Store(true)
	if nc := c.nc.Load(); nc != nil {
		nc.Close()
	}
}

// RequestAll sends one request and returns the answers of every node the
// connection knows of (its configured and discovered servers), or those
// that came before ctx ended or straggle passed after the first.
func (c *natsCell) RequestAll(ctx context.Context, subject string, data []byte) ([]*nats.Msg, error) {
	nc := c.nc.Load()
	if nc == nil {
		return nil, nats.ErrConnectionReconnecting
	}
	return requestAll(ctx, nc, subject, data)
}

func requestAll(ctx context.Context, c *nats.Conn, subject string, data []byte) ([]*nats.Msg, error) {
	inbox := c.NewInbox()
	sub, err := c.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.PublishRequest(subject, inbox, data); err != nil {
		return nil, err
	}
	want := max(len(c.Servers()), 1)
	var out []*nats.Msg
	wait := ctx
	for len(out) < want {
		m, err := sub.NextMsgWithContext(wait)
		if err != nil {
			break
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			return nil, nats.ErrNoResponders
		}
		if out = append(out, m); len(out) == 1 {
			var cancel context.CancelFunc
			wait, cancel = context.WithTimeout(ctx, straggle)
			defer cancel()
		}
	}
	if len(out) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, nats.ErrTimeout
	}
	return out, nil
}

// cellConn is the part of a NATS connection Cells uses; *nats.Conn is
// the real one, and tests fake it to script a cell's replies.
type cellConn interface {
	IsConnected() bool
	RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error)
	Close()
}

// Cells holds one system-user connection per cell. Connections retry
// forever in the background, so a cell that is down when the control
// plane starts is reached once it comes up.
type Cells struct {
	conns map[string]cellConn
	// urls are the cells' client URLs, for connections made as an
	// account (see JetStream).
	urls    map[string]string
	names   []string
	timeout time.Duration
}

// Dial connects to every cell as the system user, in the background (see
// natsCell). onReconnect runs whenever a connection to a cell is
// (re)established, so pushes that failed can be retried at once.
func Dial(cells []Cell, keys *Keys, onReconnect func(cell string), log *slog.Logger) (*Cells, error) {
	token, kp, err := tenant.ParseCreds(keys.systemUser.Creds)
	if err != nil {
		return nil, err
	}
	c := &Cells{conns: map[string]cellConn{}, urls: map[string]string{}, timeout: 2 * time.Second}
	connect := func(cell Cell, conn *natsCell) {
		nc, err := nats.Connect(cell.NatsURL,
			nats.Name("contrail-controlplane"),
			// A cell that refuses the system user (its nodes cannot reach
			// this resolver yet) is retried like one that is down.
			nats.IgnoreAuthErrorAbort(),
			nats.UserJWT(func() (string, error) { return token, nil }, kp.Sign),
			nats.RetryOnFailedConnect(true),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250*time.Millisecond),
			nats.ConnectHandler(func(*nats.Conn) {
				log.Info("connected to cell", "cell", cell.Name, "url", cell.NatsURL)
				onReconnect(cell.Name)
			}),
			nats.ReconnectHandler(func(*nats.Conn) {
				log.Info("reconnected to cell", "cell", cell.Name)
				onReconnect(cell.Name)
			}),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					log.Warn("lost cell", "cell", cell.Name, "err", err)
				}
			}),
		)
		if err != nil {
			log.Error("cell connection not made", "cell", cell.Name, "url", cell.NatsURL, "err", err)
			return
		}
		conn.set(nc)
	}
	for _, cell := range cells {
		conn := &natsCell{}
		c.conns[cell.Name] = conn
		c.urls[cell.Name] = cell.NatsURL
		c.names = append(c.names, cell.Name)
		go connect(cell, conn)
	}
	sort.Strings(c.names)
	return c, nil
}

// Names lists the configured cells.
func (c *Cells) Names() []string { return c.names }

// Close closes every connection.
func (c *Cells) Close() {
	for _, nc := range c.conns {
		nc.Close()
	}
}

// request sends a system request to cell and returns the reply.
func (c *Cells) request(ctx context.Context, cell, subject string, body []byte) ([]byte, error) {
	nc, ok := c.conns[cell]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCell, cell)
	}
	if !nc.IsConnected() {
		return nil, fmt.Errorf("%w: %s: not connected", ErrCellUnavailable, cell)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %v", ErrCellUnavailable, cell, subject, err)
	}
	return msg.Data, nil
}

// requestAll sends a system request to every node of cell and returns
// their answers (one from a connection that cannot gather several).
func (c *Cells) requestAll(ctx context.Context, cell, subject string, body []byte) ([][]byte, error) {
	nc, ok := c.conns[cell]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCell, cell)
	}
	mr, ok := nc.(multiRequester)
	if !ok {
		data, err := c.request(ctx, cell, subject, body)
		if err != nil {
			return nil, err
		}
		return [][]byte{data}, nil
	}
	if !nc.IsConnected() {
		return nil, fmt.Errorf("%w: %s: not connected", ErrCellUnavailable, cell)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msgs, err := mr.RequestAll(ctx, subject, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %v", ErrCellUnavailable, cell, subject, err)
	}
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m.Data
	}
	return out, nil
}

// apiError is the error half of nats-server's system API replies.
type apiError struct {
	Account     string `json:"account,omitempty"`
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// Push sends an account JWT to its cell on
// $SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE and checks the replies: every node
// of a clustered cell installs the JWT and answers, and each answer must
// be a success.
func (c *Cells) Push(ctx context.Context, cell, pub, jwt string) error {
	replies, err := c.requestAll(ctx, cell, "$SYS.REQ.ACCOUNT."+pub+".CLAIMS.UPDATE", []byte(jwt))
	if err != nil {
		return err
	}
	for _, data := range replies {
		var reply struct {
			Data *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"data"`
			Error *apiError `json:"error"`
		}
		if err := json.Unmarshal(data, &reply); err != nil {
			return fmt.Errorf("%w: %s: unreadable reply %q", ErrRejected, cell, data)
		}
		if reply.Error != nil {
			return fmt.Errorf("%w: %s: %d %s", ErrRejected, cell, reply.Error.Code, reply.Error.Description)
		}
		if reply.Data == nil || reply.Data.Code != 200 {
			return fmt.Errorf("%w: %s: reply %q", ErrRejected, cell, data)
		}
	}
	return nil
}

// Connected reports whether every cell's connection is up.
func (c *Cells) Connected() bool {
	for _, nc := range c.conns {
		if !nc.IsConnected() {
			return false
		}
	}
	return true
}

// WaitConnected waits until every cell's connection is up or ctx ends.
func (c *Cells) WaitConnected(ctx context.Context) error {
	for _, name := range c.names {
		for !c.conns[name].IsConnected() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %s: %v", ErrCellUnavailable, name, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
