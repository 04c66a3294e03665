package server

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"
)

// TestLimitSocketBuffersUnderTLS: the route socket's kernel buffers are
// bounded whether or not the cluster port's TLS wraps the connection.
// Under TLS they were left to the kernel's autotuning (up to 4 MiB here),
// a first-in first-out backlog every account's messages share.
func TestLimitSocketBuffersUnderTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			var b [1]byte
			_, _ = c.Read(b[:])
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	limitSocketBuffers(tls.Client(raw, &tls.Config{InsecureSkipVerify: true}))
	sc, err := raw.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var snd, rcv int
	if err := sc.Control(func(fd uintptr) {
		snd, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		rcv, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil {
		t.Fatal(err)
	}
	// Linux reports twice what was set (its bookkeeping overhead).
	if snd != 2*routeSocketBuffer || rcv != 2*routeSocketBuffer {
		t.Fatalf("socket buffers under TLS: send %d, receive %d; want %d each", snd, rcv, 2*routeSocketBuffer)
	}
}
