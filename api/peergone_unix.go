//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package api

import (
	"errors"
	"net"
	"syscall"
)

// socketPeerGone reports whether the peer of c, a socket, has closed or
// reset the connection: a non-blocking MSG_PEEK that reads 0 bytes (the
// peer's FIN) or fails with a reset. It consumes nothing, so a request the
// client pipelined stays for fasthttp to read; bytes waiting to be read
// mean the peer is (or was just) there, unless the socket says the peer has
// sent its FIN behind them (Linux). It is called only while the
// handler owns the connection (a parked ?wait=), when fasthttp does not
// read it.
func socketPeerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	var buf [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			// Bytes waiting may be a TLS client's close_notify, sent
			// just before its FIN: the end then shows only in the
			// socket's state (peerFinished).
			gone = n == 0 || peerFinished(int(fd))
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
			gone = true
		}
		return true // done: never wait for the socket to become readable
	})
	return gone
}
