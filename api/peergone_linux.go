package api

import "golang.org/x/sys/unix"

// tcpCloseWait is TCP_CLOSE_WAIT of the kernel's TCP states
// (include/net/tcp_states.h): the peer's FIN has arrived, this side has not
// closed.
const tcpCloseWait = 8

// peerFinished reports whether the peer of the socket fd has sent its FIN,
// whatever bytes still wait unread before it. A TLS client that closes
// sends close_notify and then its FIN; the alert record (encrypted as
// application data under TLS 1.3, so a peek cannot tell it from a
// pipelined request) sits unread, and the peek alone took such a client
// to be there until its ?wait= ran out. A client that only half-closes
// while it waits for its answer is taken to be gone too, as Go's net/http
// server takes it.
func peerFinished(fd int) bool {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.State == tcpCloseWait
}
