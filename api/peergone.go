package api

import (
	"crypto/tls"
	"net"

	"github.com/cachesvc/cachesvc/api/limit"
)

// peerGone reports whether the client of a request parked on conn (the
// connection fasthttp serves it on) has closed or reset it. fasthttp does
// not read a connection while its handler runs, so without this a GET
// ?wait= whose client gave up kept its waiter, and its place in the bounded
// waiter table, until the wait ran out (up to 300 s). It looks beneath the
// server's wrappers and TLS at the socket: a TLS client that sent
// close_notify before its FIN has bytes waiting and is taken to be there.
func peerGone(conn net.Conn) bool {
	for {
		switch c := conn.(type) {
		case *trackedConn:
			conn = c.Conn
		case *tls.Conn:
			conn = c.NetConn()
		case *limit.PaceConn:
			conn = c.Conn
		default:
			return socketPeerGone(conn)
		}
	}
}
