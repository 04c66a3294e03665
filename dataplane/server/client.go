package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/protocol"
	"github.com/contrail/contrail/dataplane/subject"
)

// Why a connection ended, as /connz reports it.
const (
	reasonClientClosed   = "Client Closed"
	reasonServerShutdown = "Server Shutdown"
	reasonSlowConsumer   = "Slow Consumer (Pending Bytes)"
	reasonSlowWrite      = "Slow Consumer (Write Deadline)"
	reasonStale          = "Stale Connection"
	reasonProtocol       = "Protocol Violation"
	reasonMaxPayload     = "Maximum Payload Exceeded"
	reasonMaxConns       = "Maximum Connections Exceeded"
	reasonTLS            = "TLS Handshake Failure"
	reasonWriteError     = "Write Error"
	reasonReadError      = "Read Error"
)

const protocolErrMaxConns = protocol.ErrTextMaxConnections

// A connection's read buffer starts at minReadBuf, doubles while reads fill
// it up to readBufSize (and beyond while one operation needs more), and
// halves again after a run of small reads. An idle tenant connection then
// costs a few KiB instead of a full buffer, while a busy publisher reads
// in 64 KiB gulps after a few reads.
const (
	minReadBuf  = 4 << 10
	readBufSize = 64 << 10
	// smallReads is how many reads in a row that use under 1/8 of the
	// buffer make it shrink.
	smallReads = 16
)

// client is one client connection.
//
// Threading: the read loop goroutine parses and processes everything the
// client sends; the flusher goroutine writes everything queued in out. Other
// clients' read loops append deliveries to out. Fields marked "read loop"
// are touched only by the read loop.
type client struct {
	sender // the client's read loop publishes through it
	cid    uint64
	conn   net.Conn // replaced once by a TLS upgrade; guarded by mu after that
	acc    *Account
	host   string
	port   int
	start  time.Time
	trace  bool

	out *outbound

	// Set at CONNECT by the read loop, read by deliverers.
	headers atomic.Bool
	echo    atomic.Bool
	// infoUpdates: the client takes asynchronous INFO (CONNECT protocol
	// >= 1), so it hears of nodes joining the cluster.
	infoUpdates atomic.Bool

	opts connectOpts // read loop

	// Operator mode. nonce is fixed at accept; the rest is set by the read
	// loop at CONNECT, before any subscription exists, and read-only
	// after.
	nonce  []byte
	authed atomic.Bool
	mpay   int64 // max payload for this user; <= 0 means the server's
	msubs  int64 // max subscriptions; < 0 means unlimited
	// mpend is the most bytes queued for the client before it is cut
	// off as a slow consumer: max_pending, or less where the user or
	// account JWT's data limit says so. Set at CONNECT; the flusher and
	// closers read it meanwhile.
	mpend atomic.Int64
	perms *permissions

	mu struct {
		sync.Mutex
		subs      map[string]*subscription // by sid; guarded by mu
		connected bool                     // CONNECT seen; guarded by mu
		name      string                   // guarded by mu
		lang      string                   // guarded by mu
		version   string                   // guarded by mu
		reason    string                   // guarded by mu
		rtt       time.Duration            // guarded by mu
		pingSent  time.Time                // guarded by mu
		tlsState  *tls.ConnectionState     // guarded by mu
		pingTimer *time.Timer              // guarded by mu
		authTimer *time.Timer              // guarded by mu
		expiry    *time.Timer              // user JWT expiry; guarded by mu
		user      *jwt.UserClaims          // operator mode; guarded by mu
		account   string                   // guarded by mu
	}

	inMsgs, outMsgs, inBytes, outBytes atomic.Uint64
	lastActivity                       atomic.Int64 // unix nanos
	pingsOut                           atomic.Int32
	closed                             atomic.Bool
	flushDone                          chan struct{} // closed when the flusher exits
}

func (s *Server) newClient(conn net.Conn) *client {
	c := &client{
		cid:       s.nextCID.Add(1),
		conn:      conn,
		acc:       s.global,
		start:     time.Now(),
		out:       newOutbound(),
		flushDone: make(chan struct{}),
		trace:     s.log.Enabled(context.Background(), LevelTrace),
	}
	c.sender = sender{srv: s, from: c}
	c.echo.Store(true)
	c.msubs = -1
	c.mpend.Store(s.opts.MaxPending)
	c.mu.subs = make(map[string]*subscription)
	c.mu.account = s.global.name
	if s.authRequired && (s.static == nil || len(s.static.nkeys) > 0) {
		c.nonce = newNonce() // signed by nkey and JWT users only
	}
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		c.host, c.port = ta.IP.String(), ta.Port
	}
	c.touch()
	return c
}

// LevelTrace logs every protocol operation; below slog.LevelDebug.
const LevelTrace = slog.Level(-8)

func (c *client) touch() { c.lastActivity.Store(time.Now().UnixNano()) }

func (c *client) logger() *slog.Logger {
	return c.srv.log.With("cid", c.cid, "remote", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
}

// handle runs a connection from accept to close.
func (s *Server) handle(conn net.Conn) {
	c := s.newClient(conn)
	tlsFirst := s.tls != nil && s.opts.TLS.HandshakeFirst
	if tlsFirst && s.opts.TLS.HandshakeFirstFallback > 0 {
		tlsFirst = c.clientSpeaksFirst(s.opts.TLS.HandshakeFirstFallback)
	}
	if tlsFirst && !c.handshake() {
		return
	}
	conn = c.netConn()
	if refusal, ok := s.register(c); !ok {
		if refusal != "" {
			s.log.Warn("connection refused", "remote", conn.RemoteAddr().String(), "reason", refusal)
			c.refuse(refusal)
		}
		c.netConn().Close()
		return
	}
	// INFO goes out before the flusher starts: a TLS upgrade follows it on
	// the same socket and swaps c.conn.
	conn.SetWriteDeadline(time.Now().Add(s.opts.WriteDeadline))
	if _, err := conn.Write(s.infoFor(c)); err != nil {
		c.close(reasonWriteError, false)
		return
	}
	conn.SetWriteDeadline(time.Time{})
	if s.tls != nil && !tlsFirst && c.wantsTLS() && !c.handshake() {
		c.close(reasonTLS, false)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.flushLoop()
	}()
	c.logger().Debug("client connected")
	c.schedulePing()
	if s.authRequired {
		c.mu.Lock()
		c.mu.authTimer = time.AfterFunc(s.authWait(), func() {
			if !c.authed.Load() {
				c.logger().Info("no CONNECT in time, closing")
				c.sendErr(errTextAuthTimeout)
				c.close(reasonAuthTimeout, true)
			}
		})
		c.mu.Unlock()
	}
	c.readLoop()
}

// wantsTLS reports whether the client must (or, where TLS is optional,
// chose to) upgrade after INFO: an optional-TLS client opts in by starting
// a handshake, whose first byte is a TLS handshake record (0x16).
func (c *client) wantsTLS() bool {
	if !c.srv.opts.AllowNonTLS {
		return true
	}
	if !c.clientSpeaksFirst(c.srv.opts.TLS.Timeout) {
		return false
	}
	return c.conn.(*replayConn).first[0] == 0x16
}

// clientSpeaksFirst waits up to d for the client's first byte. A client
// that starts a TLS handshake at once gets TLS first; one that waits for
// INFO gets it in the usual order. The byte read is replayed.
func (c *client) clientSpeaksFirst(d time.Duration) bool {
	c.conn.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, _ := c.conn.Read(b[:])
	c.conn.SetReadDeadline(time.Time{})
	if n == 0 {
		return false
	}
	c.conn = &replayConn{Conn: c.conn, first: b[:n]}
	return true
}

// replayConn hands back bytes already read before reading the socket.
type replayConn struct {
	net.Conn
	first []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}

// refuseLinger bounds how long a refused connection is drained.
const refuseLinger = time.Second

// refuse sends INFO and -ERR to a client that will not be served. It then
// half-closes and reads what the client sends meanwhile (its CONNECT and
// PING) before the caller closes: closing with that data unread would
// reset the connection, and the client would see a broken pipe instead of
// the -ERR saying why.
func (c *client) refuse(text string) {
	conn := c.netConn()
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(append(c.srv.infoFor(c), protocol.AppendErr(nil, text)...)); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		conn.SetReadDeadline(time.Now().Add(refuseLinger))
		io.Copy(io.Discard, io.LimitReader(conn, 64<<10))
	}
}

// handshake upgrades the connection to TLS within the configured timeout.
func (c *client) handshake() bool {
	tc := tls.Server(c.conn, c.srv.tls)
	timeout := c.srv.opts.TLS.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		c.logger().Warn("tls handshake failed", "err", err)
		c.conn.Close()
		return false
	}
	tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	c.mu.Lock()
	c.conn = tc
	c.mu.tlsState = &st
	c.mu.Unlock()
	return true
}

// readLoop parses and processes what the client sends until it fails.
func (c *client) readLoop() {
	lim := protocol.Limits{
		MaxControlLine: int(c.srv.opts.MaxControlLine),
		MaxPayload:     int(c.srv.opts.MaxPayload),
	}
	conn := c.netConn()
	var scratch writeScratch
	buf := make([]byte, minReadBuf)
	var start, end, small int
	var op protocol.Op
	for !c.closed.Load() {
		free := len(buf) - end
		n, rerr := conn.Read(buf[end:])
		end += n
		if n > 0 {
			c.touch()
		}
		for start < end {
			used, err := protocol.Parse(buf[start:end], lim, &op)
			if err != nil {
				c.protocolError(err)
				return
			}
			if used == 0 {
				break
			}
			if c.trace {
				c.traceIn(buf[start : start+used])
			}
			if !c.process(&op) {
				c.wakePending()
				return
			}
			start += used
		}
		c.wakePending()
		if c.hasOutput() {
			if _, err := c.writeOut(conn, &scratch); err != nil {
				return
			}
		}
		if rerr != nil {
			reason := reasonReadError
			if errors.Is(rerr, io.EOF) {
				reason = reasonClientClosed
			}
			c.close(reason, false)
			return
		}
		buf, start, end = compact(buf, start, end)
		buf, small = resize(buf, end, n == free, n < len(buf)/8, small)
	}
}

// resize grows an empty-enough buffer that a read filled, and shrinks one
// that has seen only small reads for a while; end bytes are kept.
func resize(buf []byte, end int, filled, smallRead bool, small int) ([]byte, int) {
	switch {
	case filled && len(buf) < readBufSize:
		bigger := make([]byte, 2*len(buf))
		copy(bigger, buf[:end])
		return bigger, 0
	case !smallRead:
		return buf, 0
	case small+1 >= smallReads && len(buf) > minReadBuf && end <= len(buf)/4:
		smaller := make([]byte, len(buf)/2)
		copy(smaller, buf[:end])
		return smaller, 0
	}
	return buf, small + 1
}

// compact moves unparsed bytes to the front, growing the buffer when a
// partial operation fills it and shrinking it back once it is empty.
func compact(buf []byte, start, end int) ([]byte, int, int) {
	if start == end {
		if len(buf) > readBufSize {
			buf = make([]byte, readBufSize)
		}
		return buf, 0, 0
	}
	if start > 0 {
		copy(buf, buf[start:end])
		end -= start
	}
	if end == len(buf) {
		bigger := make([]byte, 2*len(buf))
		copy(bigger, buf[:end])
		buf = bigger
	}
	return buf, 0, end
}

// protocolError answers a parse failure as nats-server does and closes.
func (c *client) protocolError(err error) {
	text, reason := protocol.ErrTextUnknownOp, reasonProtocol
	switch {
	case errors.Is(err, protocol.ErrMaxPayload):
		text, reason = protocol.ErrTextMaxPayload, reasonMaxPayload
	case errors.Is(err, protocol.ErrControlLine):
		text = protocol.ErrTextControlLine
	}
	c.logger().Warn("protocol error, closing", "err", err)
	c.sendErr(text)
	c.close(reason, true)
}

// process handles one operation; false means the connection is done.
func (c *client) process(op *protocol.Op) bool {
	if c.srv.authRequired && op.Kind != protocol.KindConnect && !c.authed.Load() {
		// Nothing but CONNECT is served before a client authenticates.
		c.logger().Warn("operation before CONNECT where authentication is required, closing")
		c.sendErr(errTextAuthViolation)
		c.close(reasonAuthViolation, true)
		return false
	}
	switch op.Kind {
	case protocol.KindPub, protocol.KindHPub:
		return c.processPub(op)
	case protocol.KindSub:
		c.processSub(op) // answers +OK itself
		return true
	case protocol.KindUnsub:
		c.processUnsub(op) // answers +OK itself
		return true
	case protocol.KindPing:
		c.queue(protocol.Pong)
		c.pcd = append(c.pcd, c)
		return true
	case protocol.KindPong:
		c.processPong()
		return true
	case protocol.KindConnect:
		return c.processConnect(op.Arg)
	}
	return true // +OK and -ERR from a client need no answer
}

// ok sends +OK to verbose clients.
func (c *client) ok() {
	if c.opts.Verbose {
		c.queue(protocol.OK)
		c.pcd = append(c.pcd, c)
	}
}

func (c *client) processConnect(arg []byte) bool {
	// Absent fields keep nats-server's defaults: a bare CONNECT {} is
	// verbose and pedantic.
	opts := connectOpts{Verbose: true, Pedantic: true, Echo: true}
	if err := json.Unmarshal(arg, &opts); err != nil {
		c.logger().Warn("bad CONNECT", "err", err)
		c.sendErr(protocol.ErrTextUnknownOp)
		c.close(reasonProtocol, true)
		return false
	}
	if c.srv.authRequired {
		if c.authed.Load() {
			c.ok() // a second CONNECT cannot change who the client is
			return true
		}
		if err := c.authenticate(&opts); err != nil {
			c.logger().Warn("authentication failed", "err", err)
			text, reason := errTextAuthViolation, reasonAuthViolation
			if errors.Is(err, errConnLimit) {
				text, reason = errTextAccountConns, reasonAccountConns
			}
			c.sendErr(text)
			c.close(reason, true)
			return false
		}
		c.authed.Store(true)
		c.mu.Lock()
		if c.mu.authTimer != nil {
			c.mu.authTimer.Stop()
		}
		c.mu.Unlock()
	}
	c.opts = opts
	c.headers.Store(opts.Headers)
	c.echo.Store(opts.Echo)
	c.infoUpdates.Store(opts.Protocol >= 1)
	c.mu.Lock()
	c.mu.connected = true
	c.mu.name, c.mu.lang, c.mu.version = opts.Name, opts.Lang, opts.Version
	c.mu.Unlock()
	c.srv.accountConnected(c)
	c.ok()
	return true
}

func (c *client) processPub(op *protocol.Op) bool {
	if op.Kind == protocol.KindHPub && !c.opts.Headers && c.mu.connected {
		// A client that did not ask for headers cannot send them.
		c.sendErr(protocol.ErrTextUnknownOp)
		c.close(reasonProtocol, true)
		return false
	}
	if c.opts.Pedantic && !subject.ValidLiteral(op.Subject) {
		c.queue(protocol.AppendErr(nil, protocol.ErrTextInvalidPublish))
		c.pcd = append(c.pcd, c)
	}
	if c.mpay > 0 && int64(len(op.Msg)) > c.mpay {
		c.logger().Warn("payload over the user's limit, closing", "size", len(op.Msg), "max", c.mpay)
		c.sendErr(errTextMaxPayloadVio)
		c.close(reasonMaxPayload, true)
		return false
	}
	if c.perms != nil && !c.perms.canPublish(string(op.Subject), time.Now()) {
		c.queue(protocol.AppendErr(nil, fmt.Sprintf("Permissions Violation for Publish to %q", op.Subject)))
		c.pcd = append(c.pcd, c)
		return true
	}
	c.inMsgs.Add(1)
	c.inBytes.Add(uint64(len(op.Msg)))
	c.srv.stats.inMsgs.Add(1)
	c.srv.stats.inBytes.Add(uint64(len(op.Msg)))
	hdr := -1
	if op.Kind == protocol.KindHPub {
		hdr = op.HdrLen
	}
	// +OK acknowledges the PUB before any delivery it causes, as in
	// nats-server: a verbose client subscribed to its own subject reads
	// +OK, then the MSG.
	c.ok()
	c.route(op.Subject, op.Reply, hdr, op.Msg)
	return true
}

func (c *client) processSub(op *protocol.Op) {
	if !subject.ValidFilter(op.Subject) || (len(op.Queue) > 0 && !validQueue(op.Queue)) {
		c.queue(protocol.AppendErr(nil, protocol.ErrTextInvalidSubject))
		c.pcd = append(c.pcd, c)
		return
	}
	if c.perms != nil && !c.perms.canSubscribe(string(op.Subject), string(op.Queue)) {
		text := fmt.Sprintf("Permissions Violation for Subscription to %q", op.Subject)
		if len(op.Queue) > 0 {
			text = fmt.Sprintf("Permissions Violation for Subscription to %q using queue %q", op.Subject, op.Queue)
		}
		c.queue(protocol.AppendErr(nil, text))
		c.pcd = append(c.pcd, c)
		return
	}
	// The account's bound on this node: its subscriptions are announced
	// to every peer, which holds them all (see route.remoteSub).
	// Concurrent SUBs of its clients may pass it by one each.
	if max := c.srv.opts.MaxAccountSubs; int64(c.acc.clientSubs()) >= max {
		c.logger().Warn("account subscription limit reached on this node", "max_account_subscriptions", max)
		c.queue(protocol.AppendErr(nil, errTextMaxSubs))
		c.pcd = append(c.pcd, c)
		return
	}
	sub := &subscription{
		acc:     c.acc,
		client:  c,
		subject: bytes.Clone(op.Subject),
		queue:   bytes.Clone(op.Queue),
		sid:     bytes.Clone(op.SID),
	}
	c.mu.Lock()
	if _, dup := c.mu.subs[string(op.SID)]; dup {
		c.mu.Unlock()
		c.ok()
		return
	}
	if c.msubs >= 0 && int64(len(c.mu.subs)) >= c.msubs {
		c.mu.Unlock()
		c.logger().Warn("subscription limit reached", "max", c.msubs)
		c.queue(protocol.AppendErr(nil, errTextMaxSubs))
		c.pcd = append(c.pcd, c)
		return
	}
	c.mu.subs[string(sub.sid)] = sub
	c.mu.Unlock()
	if err := c.acc.insertSub(string(sub.subject), string(sub.queue), sub); err != nil {
		c.mu.Lock()
		delete(c.mu.subs, string(sub.sid))
		c.mu.Unlock()
		c.queue(protocol.AppendErr(nil, protocol.ErrTextInvalidSubject))
		c.pcd = append(c.pcd, c)
		return
	}
	c.acc.notifyInterest(string(sub.subject))
	c.ok()
}

// validQueue accepts queue group names without blanks or wildcards tokens.
func validQueue(q []byte) bool {
	for _, b := range q {
		switch b {
		case ' ', '\t', '\r', '\n':
			return false
		}
	}
	return true
}

func (c *client) processUnsub(op *protocol.Op) {
	c.mu.Lock()
	sub := c.mu.subs[string(op.SID)]
	c.mu.Unlock()
	if sub != nil {
		if op.Max > 0 && sub.delivered.Load() < int64(op.Max) {
			sub.max.Store(int64(op.Max))
			// A delivery racing with this store may have passed the limit
			// unseen; recheck so the subscription cannot outlive it.
			if sub.delivered.Load() < int64(op.Max) {
				c.ok()
				return
			}
		}
		c.unsubscribe(sub)
	}
	c.ok()
}

// unsubscribe removes sub from its client and account; safe from any
// goroutine and idempotent.
func (c *client) unsubscribe(sub *subscription) {
	c.mu.Lock()
	cur, ok := c.mu.subs[string(sub.sid)]
	if ok && cur == sub {
		delete(c.mu.subs, string(sub.sid))
	}
	c.mu.Unlock()
	if ok && cur == sub {
		sub.acc.removeSub(string(sub.subject), string(sub.queue), sub)
	}
}

func (c *client) processPong() {
	c.pingsOut.Store(0)
	c.mu.Lock()
	if !c.mu.pingSent.IsZero() {
		c.mu.rtt = time.Since(c.mu.pingSent)
		c.mu.pingSent = time.Time{}
	}
	c.mu.Unlock()
}

// hasOutput reports whether the connection's own queue holds bytes.
func (c *client) hasOutput() bool {
	o := c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.pending > 0 && !o.mu.writing
}
