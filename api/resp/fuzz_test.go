package resp_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/resp"
)

// FuzzConn feeds arbitrary bytes to a real listener (real store, real pt2
// plugin) as one client's input. Whatever the input, the server answers
// with well-formed RESP replies only, closes the connection once the
// client has closed its side, never lets the parser panic, and keeps
// serving other clients.
func FuzzConn(f *testing.F) {
	for _, seed := range []string{
		encode("PING"),
		encode("SET", torchKey("fuzz"), torchValue("QUJD", 12)) + encode("GET", torchKey("fuzz")),
		encode("MGET", torchKey("fuzz"), "triton:k:f.json", "bad"),
		encode("HELLO", "3", "AUTH", "default", "x", "SETNAME", "n") + encode("GET", torchKey("absent")),
		encode("CLIENT", "SETINFO", "LIB-NAME", "redis-py") + encode("SELECT", "0") + encode("QUIT"),
		encode("SET", torchKey("o"), "v", "NX", "EX", "10") + encode("EXISTS", torchKey("o"), torchKey("o")),
		"PING\r\nECHO \"a b\" 'c'\r\n",
		"*1\r\n$-2\r\n\r\n",
		"*1\r\n$9223372036854775807\r\nab\r\n",
		"*3\r\n$3\r\nSET\r\n$4\r\nkkkk\r\n$70000\r\nabc",
		"*100000\r\n",
		"$4 PING\r\n",
		"*0\r\n*-1\r\n",
		"\r\n\r\n*1\r\n$4\r\nPING\r\n",
	} {
		f.Add([]byte(seed))
	}
	e := start(f, options{resp: func(c *resp.Config) {
		c.MaxValueBytes, c.MaxKeys, c.IdleTimeout = 64<<10, 8, 5*time.Second
	}})
	f.Fuzz(func(t *testing.T, input []byte) {
		c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		go func() {
			_, _ = c.Write(input) // the server may close first: a protocol error
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		r := bufio.NewReader(c)
		for {
			s, err := readReply(r)
			if errors.Is(err, io.EOF) && s == "" {
				break // closed between replies
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server neither answered nor closed the connection (read %q)", s)
			}
			if err != nil {
				if isReset(err) && s == "" {
					break // closed with input unread
				}
				t.Fatalf("malformed reply: %v (read %q)", err, s)
			}
		}
		if n := e.metricIn(t, `cachesvc_resp_parser_panics_total`); n != 0 {
			t.Fatalf("the parser panicked %v times", n)
		}
		pc, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		_ = pc.SetDeadline(time.Now().Add(20 * time.Second))
		p := &raw{t: t, c: pc, r: bufio.NewReader(pc)}
		if got := p.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING after the input: %q", got)
		}
	})
}

// isReset reports whether err is a connection reset, what a close with
// unread input looks like to the peer.
func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}
