package api_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/proxyaddr"
)

// TestMaxConns: with MaxConns open (idle keep-alive) connections, one more
// is answered 503 too_many_connections with Retry-After and closed (and
// logged, naming the client and the answer's request id: the counter
// alone told an operator nothing of who), the open ones keep being
// served, and a slot freed by a close is taken again. Without the bound,
// idle connections from one client grew until the process ran out of file
// descriptors.
func TestMaxConns(t *testing.T) {
	const max = 3
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		API:    func(c *api.Config) { c.Limits.MaxConns = max },
	})
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
	if l := logs.String(); !strings.Contains(l, "--max-conns connections open") || !strings.Contains(l, "max_conns=3") ||
		!strings.Contains(l, "client=127.0.0.1") || !strings.Contains(l, "request_id="+resp.Header.Get("X-Request-Id")) {
		t.Fatalf("the refusal is not logged with the client address, limit and request id %q:\n%s", resp.Header.Get("X-Request-Id"), l)
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

// nonLoopbackIP returns an address of this host's that is not loopback,
// to connect from, or skips the test when the host has none.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("this host has no non-loopback IPv4 address to connect from")
	return nil
}

// TestMaxConnsPerAddr: with MaxConnsPerAddr connections open from one
// (non-loopback) address, one more from it is answered 503
// too_many_connections naming --max-conns-per-addr, counted under
// limit="connections_per_addr" and logged, while another address (here
// loopback, which is exempt) still connects; a close frees the place.
// Without the bound one host could hold every --max-conns place.
func TestMaxConnsPerAddr(t *testing.T) {
	from := nonLoopbackIP(t)
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		API:    func(c *api.Config) { c.Limits.MaxConns, c.Limits.MaxConnsPerAddr = 10, 2 },
	})
	addr := strings.TrimPrefix(srv.URL, "http://")
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	dialFrom := func() (net.Conn, *bufio.Reader, *http.Response) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(conn, get)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return conn, br, resp
	}
	var held []net.Conn
	for i := 0; i < 2; i++ {
		conn, _, resp := dialFrom()
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("connection %d from %s: %d", i, from, resp.StatusCode)
		}
		held = append(held, conn)
	}
	_, _, resp := dialFrom()
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != 503 || errCode(t, body) != "too_many_connections" || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), "--max-conns-per-addr") {
		t.Fatalf("third connection from %s: %d %s; want 503 naming --max-conns-per-addr", from, resp.StatusCode, body)
	}
	if got := limitedCount(t, srv, "connections_per_addr"); got != 1 {
		t.Fatalf("cachesvc_limited_total{limit=connections_per_addr} = %v, want 1", got)
	}
	// The address under the key every request line uses, and the id the
	// refused client was given.
	if !strings.Contains(logs.String(), "max_conns_per_addr=2") || !strings.Contains(logs.String(), "client="+from.String()) ||
		!strings.Contains(logs.String(), "request_id="+resp.Header.Get("X-Request-Id")) {
		t.Fatalf("the refusal is not logged with the client address, limit and request id %q:\n%s", resp.Header.Get("X-Request-Id"), logs.String())
	}
	// Loopback (a local proxy, a health check) is not limited per address.
	for i := 0; i < 3; i++ {
		if resp, _, _, _ := rawExchange(t, addr, get); resp.StatusCode != 200 {
			t.Fatalf("loopback connection %d: %d", i, resp.StatusCode)
		}
	}
	// A close frees the address's place once the server sees it.
	held[0].Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		conn, _, resp := dialFrom()
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place after a close: %d", resp.StatusCode)
		}
	}
}

// TestMaxConnsPerAddrExemptsTrustedProxies: a reverse proxy listed in
// TrustedProxies carries every client's connections, so it is not limited
// as one client address.
func TestMaxConnsPerAddrExemptsTrustedProxies(t *testing.T) {
	from := nonLoopbackIP(t)
	trusted, err := proxyaddr.Parse(from.String())
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{
		API: func(c *api.Config) {
			c.Limits.MaxConns, c.Limits.MaxConnsPerAddr = 10, 2
			c.TrustedProxies = trusted
		},
	})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := 0; i < 4; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close() // held open: each counts while the next is made
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("connection %d from trusted proxy %s: %d, want 200 (not limited per address)", i, from, resp.StatusCode)
		}
	}
}
