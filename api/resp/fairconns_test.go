package resp_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/resp"
)

// dialFrom connects to e from the loopback address local (127.0.0.2 is
// another host to the server).
func (e *env) dialFrom(local string) *raw {
	e.t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &raw{t: e.t, c: c, r: bufio.NewReader(c)}
}

// TestMaxConnsFairShare: one address holding every connection place (no
// token is needed to open one, and an idle one lasts --redis-idle-timeout)
// no longer locks every other host out: a connection from an address
// holding less than half the places closes an idle connection of the
// address holding more than half. Past half each, both are refused.
func TestMaxConnsFairShare(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) { c.MaxConns = 4 }})
	var hog []*raw
	for range 4 {
		r := e.dialFrom("127.0.0.1")
		converse(t, r, []step{{[]string{"PING"}, "+PONG\r\n"}})
		hog = append(hog, r)
	}
	for range 2 {
		converse(t, e.dialFrom("127.0.0.2"), []step{{[]string{"PING"}, "+PONG\r\n"}})
	}
	expectClosed(t, e.dialFrom("127.0.0.2"), "-ERR max number of clients reached\r\n")
	expectClosed(t, e.dialFrom("127.0.0.1"), "-ERR max number of clients reached\r\n")
	closed := 0
	for _, r := range hog {
		_ = r.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := r.r.ReadByte(); err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				closed++
			}
		}
	}
	if closed != 2 {
		t.Errorf("%d of the first address's idle connections closed, want 2", closed)
	}
}
