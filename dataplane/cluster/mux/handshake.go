package mux

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The cluster secret handshake. Invariant: nothing past the preface is
// handed to a channel, and nothing a channel writes reaches the peer,
// until both ends have shown they hold the secret.
//
//	dialer   → preface (3 bytes) ‖ dialer nonce (16)
//	listener → listener nonce (16) ‖ HMAC(secret, "listener" ‖ preface ‖ nonces)
//	dialer   → HMAC(secret, "dialer" ‖ preface ‖ nonces)
//
// Fresh nonces from both ends make every proof good for one connection
// only, so a recorded handshake cannot be replayed in either direction;
// the distinct labels keep one end's proof from serving as the other's;
// the preface inside the MAC keeps a proof for one channel from opening
// another. The secret itself never crosses the wire. The handshake
// authenticates the peer; it does not encrypt what follows.

const nonceLen = 16

// ErrHandshake is the cause of a refused handshake: the peer does not
// hold this node's cluster secret (or holds none).
var ErrHandshake = errors.New("cluster secret does not match")

func proof(secret []byte, label string, p [3]byte, nd, nl []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write(p[:])
	h.Write(nd)
	h.Write(nl)
	return h.Sum(nil)
}

// dialHandshake runs the dialer's half on c, whose deadline bounds it.
func dialHandshake(c net.Conn, secret []byte, p [3]byte) error {
	hello := make([]byte, 3+nonceLen)
	copy(hello, p[:])
	if _, err := rand.Read(hello[3:]); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if _, err := c.Write(hello); err != nil {
		return fmt.Errorf("preface: %w", err)
	}
	nd := hello[3:]
	reply := make([]byte, nonceLen+sha256.Size)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("handshake: %w (does the peer use the same cluster secret?)", err)
	}
	nl, mac := reply[:nonceLen], reply[nonceLen:]
	if !hmac.Equal(mac, proof(secret, "listener", p, nd, nl)) {
		return fmt.Errorf("handshake: the peer's proof: %w", ErrHandshake)
	}
	if _, err := c.Write(proof(secret, "dialer", p, nd, nl)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	return nil
}

// acceptHandshake runs the listener's half on c, after the preface p.
func acceptHandshake(c net.Conn, secret []byte, p [3]byte) error {
	nd := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, nd); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	nl := make([]byte, nonceLen)
	if _, err := rand.Read(nl); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if _, err := c.Write(append(nl, proof(secret, "listener", p, nd, nl)...)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	mac := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, mac); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if !hmac.Equal(mac, proof(secret, "dialer", p, nd, nl)) {
		return fmt.Errorf("handshake: %w", ErrHandshake)
	}
	return nil
}

// warnLimit logs at most one warning per warnEvery and counts the ones
// it held back: whoever can reach the port can make it refuse
// connections, and must not be able to flood the log by doing so.
type warnLimit struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const warnEvery = 10 * time.Second

func (w *warnLimit) log(log *slog.Logger, msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	log.Warn(msg, append(args, "suppressed_since_last", n)...)
}
