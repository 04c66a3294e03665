package server

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/contrail/contrail/dataplane/protocol"
)

// netConn is the connection's current socket (TLS replaces it once).
func (c *client) netConn() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// flushLoop is the connection's writer of last resort: it waits for
// queued bytes and writes them with one vectored write per wake-up, under
// the write deadline. The read loop also writes its own connection's
// queue in place after each batch (see writeOut), which saves a goroutine
// hand-off on request/reply round trips. It exits once the connection is
// stopped and its queue is drained, or a write fails. It never closes the
// socket: close does.
func (c *client) flushLoop() {
	defer close(c.flushDone)
	conn := c.netConn()
	var scratch writeScratch
	o := c.out
	for range o.signal {
		busy, err := c.writeOut(conn, &scratch)
		if err != nil {
			return
		}
		if busy {
			continue // the other writer wakes us when it is done
		}
		o.mu.Lock()
		done := o.mu.stop && !o.mu.writing && o.mu.q.empty()
		o.mu.Unlock()
		if done {
			return
		}
	}
}

// writeScratch is one writer's reusable slices.
type writeScratch struct{ taken, bufs net.Buffers }

// writeOut writes everything queued, unless another goroutine is writing
// already (busy). Afterwards it wakes the flusher if more arrived
// meanwhile or the connection is stopping, so nothing is left behind. A
// failed write closes the connection.
func (c *client) writeOut(conn net.Conn, sc *writeScratch) (busy bool, err error) {
	o := c.out
	o.mu.Lock()
	if o.mu.writing {
		o.mu.Unlock()
		return true, nil
	}
	sc.taken = o.takeLocked(sc.taken[:0])
	if len(sc.taken) == 0 {
		o.mu.Unlock()
		return false, nil
	}
	o.mu.writing = true
	o.mu.Unlock()

	sc.bufs = append(sc.bufs[:0], sc.taken...)
	conn.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteDeadline))
	n, err := sc.bufs.WriteTo(conn)
	release(sc.taken)

	o.mu.Lock()
	o.mu.pending -= n
	o.mu.writing = false
	o.unstallLocked(c.mpend.Load())
	again := !o.mu.q.empty() || o.mu.stop
	o.mu.Unlock()
	if err != nil {
		reason := reasonWriteError
		if errors.Is(err, os.ErrDeadlineExceeded) && !c.closed.Load() {
			reason = reasonSlowWrite
			c.countSlow()
			c.logger().Warn("slow consumer, closing", "reason", reason)
		}
		c.close(reason, false)
		o.wake() // the flusher, if it saw us busy, must notice the stop
		return false, err
	}
	if again {
		o.wake()
	}
	return false, nil
}

// slowConsumer cuts off a client whose queue passed max_pending: the queue
// is dropped so the server's memory stays bounded.
func (c *client) slowConsumer(reason string) {
	if c.closed.Load() {
		return
	}
	c.countSlow()
	c.logger().Warn("slow consumer, closing", "reason", reason)
	c.close(reason, false)
}

// countSlow counts a slow consumer for the server and the client's
// account.
func (c *client) countSlow() {
	c.srv.stats.slowConsumers.Add(1)
	if a := c.account(); a != nil {
		a.slowConsumers.Add(1)
	}
}

// account is the client's account, safe to ask from any goroutine: nil
// while a client that must authenticate has not (its account is set by
// the read loop before authed is).
func (c *client) account() *Account {
	if c.srv.authRequired && !c.authed.Load() {
		return nil
	}
	return c.acc
}

// close ends the connection once: it stops the queue (dropping it unless
// flush), unsubscribes everything, and closes the socket, after the queue
// drains when flushing (bounded by the write deadline).
func (c *client) close(reason string, flush bool) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.mu.reason = reason
	conn := c.conn
	subs := make([]*subscription, 0, len(c.mu.subs))
	for _, sub := range c.mu.subs {
		subs = append(subs, sub)
	}
	clear(c.mu.subs)
	if c.mu.pingTimer != nil {
		c.mu.pingTimer.Stop()
	}
	for _, t := range []*time.Timer{c.mu.authTimer, c.mu.expiry} {
		if t != nil {
			t.Stop()
		}
	}
	c.mu.Unlock()

	o := c.out
	o.mu.Lock()
	o.mu.stop = true
	if !flush {
		release(o.takeLocked(nil))
		o.mu.pending = 0
	}
	o.unstallLocked(c.mpend.Load())
	o.mu.Unlock()
	o.wake()

	switch {
	case reason == reasonSlowConsumer:
		// Interrupt a blocked write, then say why, best effort.
		conn.SetWriteDeadline(time.Now())
		go func() {
			<-c.flushDone
			conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			conn.Write(protocol.AppendErr(nil, protocol.ErrTextSlowConsumer))
			conn.Close()
		}()
	case flush:
		go func() {
			t := time.NewTimer(min(c.srv.opts.WriteDeadline, maxCloseFlush))
			defer t.Stop()
			select {
			case <-c.flushDone:
			case <-t.C:
			}
			conn.Close()
		}()
	default:
		conn.Close()
	}
	for _, sub := range subs {
		sub.acc.removeSub(string(sub.subject), string(sub.queue), sub)
	}
	if c.authed.Load() {
		c.acc.removeClient(c)
		c.srv.accountDisconnected(c, reason)
	}
	c.srv.unregister(c)
	c.logger().Debug("client closed", "reason", reason)
}

// maxCloseFlush bounds how long a closing connection may take to drain:
// a client that stopped reading must not hold up shutdown for a whole
// write deadline.
const maxCloseFlush = 2 * time.Second

// schedulePing arms the server PING that detects dead peers.
func (c *client) schedulePing() {
	iv := c.srv.opts.PingInterval
	if iv <= 0 {
		return
	}
	c.mu.Lock()
	c.mu.pingTimer = time.AfterFunc(iv, c.ping)
	c.mu.Unlock()
}

// ping sends a PING, or closes the connection when ping_max PINGs went
// unanswered.
func (c *client) ping() {
	if c.closed.Load() {
		return
	}
	if int(c.pingsOut.Add(1)) > c.srv.opts.PingMax {
		c.logger().Info("stale connection, closing")
		c.srv.stats.staleConns.Add(1)
		c.sendErr(protocol.ErrTextStale)
		c.close(reasonStale, true)
		return
	}
	c.mu.Lock()
	c.mu.pingSent = time.Now()
	c.mu.pingTimer.Reset(c.srv.opts.PingInterval)
	c.mu.Unlock()
	c.queue(protocol.Ping)
	c.out.wake()
}
