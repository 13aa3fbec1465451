package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestMaxConns: with MaxConns open (idle keep-alive) connections, one more
// is answered 503 too_many_connections with Retry-After and closed, the
// open ones keep being served, and a slot freed by a close is taken again.
// Without the bound, idle connections from one client grew until the
// process ran out of file descriptors.
func TestMaxConns(t *testing.T) {
	const max = 3
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Limits.MaxConns = max }})
	addr := strings.TrimPrefix(srv.URL, "http://")
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	type open struct {
		conn net.Conn
		br   *bufio.Reader
	}
	var held []open
	for i := 0; i < max; i++ {
		resp, _, br, conn := rawExchange(t, addr, get)
		if resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i, resp.StatusCode)
		}
		held = append(held, open{conn, br})
	}
	resp, body, _, _ := rawExchange(t, addr, get)
	if resp.StatusCode != 503 || errCode(t, body) != "too_many_connections" || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), "--max-conns") {
		t.Fatalf("connection past the limit: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// The open connections are still served.
	if _, err := io.WriteString(held[0].conn, get); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(held[0].br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a held connection after the refusal: %v %v", resp, err)
	}
	if got := limitedCount(t, srv, "connections"); got < 1 {
		t.Fatalf("cachesvc_limited_total{limit=connections} = %v after a refusal", got)
	}
	// A closed connection frees its slot once the server sees the close.
	held[1].conn.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		resp, _, _, conn := rawExchange(t, addr, get)
		conn.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a close: %d", resp.StatusCode)
		}
	}
}

// limitedCount reads cachesvc_limited_total{limit} from the server's
// registry.
func limitedCount(t *testing.T, srv *apitest.Server, limit string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cachesvc_limited_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == limit {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no cachesvc_limited_total{limit=%q}", limit)
	return 0
}
