package resp_test

import (
	"context"
	"io"
	"testing"

	"github.com/cachesvc/cachesvc/api/resp"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// panickyGets panics on every Get, as a bug under a command would.
type panickyGets struct{ resp.Store }

func (panickyGets) Get(context.Context, string, cachekey.Key, int64, int64) (store.Meta, io.ReadCloser, error) {
	panic("bug under GET")
}

// TestCommandPanicEndsOnlyItsConnection: a command whose handling panics
// closes its own connection and is counted; the listener and its other
// connections keep serving.
func TestCommandPanicEndsOnlyItsConnection(t *testing.T) {
	e := start(t, options{resp: func(c *resp.Config) { c.Store = panickyGets{c.Store} }})
	k := torchKey("panic")
	other := e.dial()
	if got := other.do("SET", k, "v"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	bad := e.dial()
	bad.send(encode("GET", k))
	if s, err := readReply(bad.r); err == nil {
		t.Fatalf("GET whose store call panics answered %q, want the connection closed", s)
	}
	if got := other.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING on another connection after the panic = %q, want +PONG", got)
	}
	if got := e.dial().do("SET", torchKey("after"), "w"); got != "+OK\r\n" {
		t.Errorf("SET on a new connection after the panic = %q, want +OK", got)
	}
	if got := e.metric("cachesvc_resp_command_panics_total"); got != 1 {
		t.Errorf("cachesvc_resp_command_panics_total = %v, want 1", got)
	}
}
