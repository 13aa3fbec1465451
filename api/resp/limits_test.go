package resp_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/resp"
)

// expectClosed reads the connection's remaining replies until it closes
// and checks they are exactly want. It first closes the client's side,
// which ends the server's lingering read after an error at once.
func expectClosed(t *testing.T, r *raw, want string) {
	t.Helper()
	_ = r.c.(*net.TCPConn).CloseWrite()
	expectServerClose(t, r, want)
}

// expectServerClose is expectClosed without closing the client's side:
// the server must close the connection on its own.
func expectServerClose(t *testing.T, r *raw, want string) {
	t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(r.r)
	if err != nil {
		t.Fatalf("read until close: %v (read %q)", err, b)
	}
	if got := string(b); got != want {
		t.Fatalf("before close: got %q, want %q", got, want)
	}
}

// TestLimits: each limit's answer. A value over the limit but within the
// command's framing slack is refused and the connection serves on; a
// command past the framing limit, too many arguments, a malformed frame
// and a command too large before AUTH are answered and the connection
// closed (after the server read what the client was still sending).
func TestLimits(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) {
		c.MaxValueBytes, c.MaxKeys = 1024, 4
	}})
	k := torchKey("limits")
	// The largest command: a 1 KiB value plus a 4 KiB key and 1 KiB of
	// options, or 4 keys of 4 KiB.
	const limit = 4*(4096+16) + 1024

	t.Run("value over the limit", func(t *testing.T) {
		converse(t, e.dial(), []step{
			{[]string{"SET", k, strings.Repeat("x", 1025)}, "-ERR value of 1025 bytes exceeds the limit of 1024 bytes\r\n"},
			{[]string{"GET", k}, "$-1\r\n"},
			{[]string{"SET", k, strings.Repeat("x", 1024)}, "+OK\r\n"},
		})
		if v := e.metric(`cachesvc_puts_total{result="too_large"}`); v != 1 {
			t.Errorf("too_large puts: %v, want 1", v)
		}
	})
	t.Run("command over the limit", func(t *testing.T) {
		r := e.dial()
		r.send(encode("SET", k, strings.Repeat("y", 4<<20)))
		expectClosed(t, r, fmt.Sprintf("-ERR Protocol error: a command larger than %d bytes (values are limited to 1024 bytes)\r\n", limit))
	})
	t.Run("declared bulk over the limit", func(t *testing.T) {
		r := e.dial()
		r.send("*3\r\n$3\r\nSET\r\n$4\r\nkkkk\r\n$999999999999\r\nabc")
		expectClosed(t, r, fmt.Sprintf("-ERR Protocol error: a command larger than %d bytes (values are limited to 1024 bytes)\r\n", limit))
	})
	t.Run("too many keys", func(t *testing.T) {
		converse(t, e.dial(), []step{
			{[]string{"MGET", k, k, k, k, k}, "-ERR 5 keys in one command; at most 4 are accepted\r\n"},
			{[]string{"EXISTS", k, k, k, k, k}, "-ERR 5 keys in one command; at most 4 are accepted\r\n"},
			{[]string{"MGET", k, k, k, k}, "*4\r\n..."},
		})
	})
	t.Run("too many arguments", func(t *testing.T) {
		r := e.dial()
		r.send("*100000\r\n$4\r\nMGET\r\n")
		expectClosed(t, r, "-ERR Protocol error: a command of 100000 arguments; at most 16 are accepted\r\n")
	})
	t.Run("inline line too long", func(t *testing.T) {
		r := e.dial()
		r.send("PING " + strings.Repeat("z", 8<<10))
		expectClosed(t, r, "-ERR Protocol error: an inline command longer than 4096 bytes\r\n")
	})
	for _, tc := range []struct{ name, send, want string }{
		{"negative bulk length", "*1\r\n$-2\r\n\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"overflowing bulk length", "*1\r\n$99999999999999999999\r\nab\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bad multibulk length", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"missing dollar", "*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"tile38 framing", "$4 PING\r\n", "-ERR Protocol error: expected '*', got '$'\r\n"},
		{"unbalanced quotes", "ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.dial()
			r.send(tc.send)
			expectClosed(t, r, tc.want)
		})
	}
	// The server survived all of it.
	converse(t, e.dial(), []step{{[]string{"PING"}, "+PONG\r\n"}})
	if v := e.metric(`cachesvc_resp_protocol_errors_total{reason="malformed"}`); v != 6 {
		t.Errorf("malformed protocol errors: %v, want 6", v)
	}
}

// TestUnauthenticatedLimit: before AUTH a command may be at most 64 KiB.
func TestUnauthenticatedLimit(t *testing.T) {
	g, _ := guard(t, "")
	e := start(t, options{auth: g})
	r := e.dial()
	r.send(encode("SET", torchKey("big"), strings.Repeat("x", 1<<20)))
	expectClosed(t, r, "-ERR Protocol error: a command larger than 65536 bytes before AUTH\r\n")
	r = e.dial()
	converse(t, r, []step{
		{[]string{"AUTH", tokWriter.Secret}, "+OK\r\n"},
		{[]string{"SET", torchKey("big"), strings.Repeat("x", 1<<20)}, "+OK\r\n"},
	})
}

// TestMaxConns: a connection past the limit is answered as Redis answers
// it and closed; one that leaves frees its place.
func TestMaxConns(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) { c.MaxConns = 2 }})
	a, b := e.dial(), e.dial()
	converse(t, a, []step{{[]string{"PING"}, "+PONG\r\n"}})
	converse(t, b, []step{{[]string{"PING"}, "+PONG\r\n"}})
	expectClosed(t, e.dial(), "-ERR max number of clients reached\r\n")
	if v := e.metric(`cachesvc_resp_connections_refused_total`); v != 1 {
		t.Errorf("refused: %v, want 1", v)
	}
	if v := e.metric(`cachesvc_resp_connections`); v != 2 {
		t.Errorf("open connections: %v, want 2", v)
	}
	converse(t, a, []step{{[]string{"QUIT"}, "+OK\r\n"}})
	deadline := time.Now().Add(5 * time.Second)
	for e.metric(`cachesvc_resp_connections`) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	converse(t, e.dial(), []step{{[]string{"PING"}, "+PONG\r\n"}})
}

// TestBufferBudget: while connections hold the whole buffer budget, a
// connection that needs more buffer is refused with an error to retry.
func TestBufferBudget(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) {
		c.MaxValueBytes, c.MaxKeys = 1<<20, 1
		c.MaxBufferedBytes = 1<<20 + 4096 + 1024 + 8192
	}})
	big := e.dial()
	big.send(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(torchKey("b")), torchKey("b"), 1<<20) + strings.Repeat("x", 700<<10))
	deadline := time.Now().Add(10 * time.Second)
	for e.metric(`cachesvc_resp_buffered_bytes`) < 1<<20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r := e.dial()
	r.send(encode("ECHO", strings.Repeat("e", 10<<10)))
	expectClosed(t, r, fmt.Sprintf("-ERR the server is receiving too many large commands at once (%d bytes buffered, its limit); retry later\r\n", 1<<20+4096+1024+8192))
	big.send(strings.Repeat("x", 1<<20-700<<10) + "\r\n")
	if got := big.reply(); got != "+OK\r\n" {
		t.Fatalf("the large SET: %q", got)
	}
	deadline = time.Now().Add(10 * time.Second)
	for e.metric(`cachesvc_resp_buffered_bytes`) > 4096 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if v := e.metric(`cachesvc_resp_buffered_bytes`); v != 4096 {
		t.Errorf("buffered after the large SET: %v, want 4096 (its buffer shrunk back)", v)
	}
}

// TestIdleTimeout: a connection that sends nothing for the idle timeout is
// closed; one that started a command and stalls gets the read timeout.
func TestIdleTimeout(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) {
		c.IdleTimeout, c.ReadTimeout, c.MinTransferRate = 300*time.Millisecond, 300*time.Millisecond, -1
	}})
	for _, partial := range []string{"", "*2\r\n$4\r\nECHO\r\n"} {
		r := e.dial()
		converse(t, r, []step{{[]string{"PING"}, "+PONG\r\n"}})
		r.send(partial)
		start := time.Now()
		expectServerClose(t, r, "")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("closed after %v", d)
		}
	}
}

// TestShutdownClosesIdle: Shutdown closes idle connections at once and
// Serve returns nil; a later Serve returns at once.
func TestShutdownClosesIdle(t *testing.T) {
	e := start(t, options{})
	r := e.dial()
	converse(t, r, []step{{[]string{"PING"}, "+PONG\r\n"}})
	done := make(chan error, 1)
	go func() { done <- e.resp.Shutdown(t.Context()) }()
	expectServerClose(t, r, "")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.resp.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}
