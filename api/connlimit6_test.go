package api_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// hostIPv6 returns this host's global or unique-local IPv6 addresses in
// the /64 that has the most of them, or skips the test when it has none.
// A second address in that /64 exists where one was added, e.g. in a
// network namespace:
//
//	unshare -n sh -c 'ip link set lo up; ip -6 addr add fd00::2/64 dev lo nodad;
//	  ip -6 addr add fd00::3/64 dev lo nodad; go test -run IPv6 ./api/'
func hostIPv6(t *testing.T) (prefix netip.Prefix, addrs []netip.Addr) {
	t.Helper()
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	by := map[netip.Prefix][]netip.Addr{}
	for _, a := range ifaddrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || !ip.Is6() || ip.Is4In6() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		p := netip.PrefixFrom(ip, 64).Masked()
		by[p] = append(by[p], ip)
	}
	for p, as := range by {
		if len(as) > len(addrs) {
			prefix, addrs = p, as
		}
	}
	if len(addrs) == 0 {
		t.Skip("this host has no global or unique-local IPv6 address to connect from")
	}
	return prefix, addrs
}

// TestMaxConnsPerAddrIPv6Prefix: IPv6 clients count against
// --max-conns-per-addr by /64, as one host holds a whole /64; before, each
// address of it had its own MaxConnsPerAddr places. Served on [::] (dual
// stack): with the /64's places taken, another address of it is refused
// (where the host has two), and the refusal is logged with the prefix
// (counted_as); an IPv4 client through the same listener still counts as
// its own address, and ::1 is exempt like 127.0.0.1.
func TestMaxConnsPerAddrIPv6Prefix(t *testing.T) {
	prefix, addrs := hostIPv6(t)
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Listen: "[::]:0",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		API:    func(c *api.Config) { c.Limits.MaxConns, c.Limits.MaxConnsPerAddr = 20, 2 },
	})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	// dial sends a GET from from to to (both on this host) and returns the
	// answer, holding the connection open until the test ends.
	dial := func(from, to netip.Addr) (*http.Response, []byte) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 10 * time.Second}
		conn, err := d.Dial("tcp", net.JoinHostPort(to.String(), port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(conn, get)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, body
	}
	first, other := addrs[0], addrs[len(addrs)-1]
	if first == other {
		t.Logf("only %s in %s on this host: the /64 is filled and refused from one address", first, prefix)
	}
	for i := 0; i < 2; i++ {
		if resp, body := dial(first, first); resp.StatusCode != 200 {
			t.Fatalf("connection %d from %s: %d %s", i, first, resp.StatusCode, body)
		}
	}
	resp, body := dial(other, first)
	if resp.StatusCode != 503 || errCode(t, body) != "too_many_connections" || !strings.Contains(string(body), "--max-conns-per-addr") {
		t.Fatalf("third connection from %s (%s holds 2): %d %s; want 503, its /64 %s counts as one client", other, first, resp.StatusCode, body, prefix)
	}
	if l := logs.String(); !strings.Contains(l, "client="+other.String()) || !strings.Contains(l, "counted_as="+prefix.String()) {
		t.Fatalf("the refusal is not logged with the client and its /64 (counted_as=%s):\n%s", prefix, l)
	}
	// ::1 is loopback, exempt like 127.0.0.1.
	loop := netip.IPv6Loopback()
	for i := 0; i < 3; i++ {
		if resp, body := dial(loop, loop); resp.StatusCode != 200 {
			t.Fatalf("connection %d from ::1: %d %s", i, resp.StatusCode, body)
		}
	}
	// An IPv4 client reaches the dual-stack listener as ::ffff:a.b.c.d and
	// counts as its IPv4 address, not as part of any IPv6 /64.
	v4, ok := hostIPv4()
	if !ok {
		t.Log("this host has no non-loopback IPv4 address: the IPv4-mapped part is not run")
		return
	}
	for i := 0; i < 2; i++ {
		if resp, body := dial(v4, v4); resp.StatusCode != 200 {
			t.Fatalf("connection %d from %s: %d %s", i, v4, resp.StatusCode, body)
		}
	}
	if resp, body := dial(v4, v4); resp.StatusCode != 503 {
		t.Fatalf("third connection from %s: %d %s; want 503", v4, resp.StatusCode, body)
	}
}

// TestRateIPv6Prefix: requests without a token are rate limited per client
// address, an IPv6 one by its /64; before, each address of a /64 had its
// own bucket, so one host got a fresh burst with every address.
func TestRateIPv6Prefix(t *testing.T) {
	prefix, addrs := hostIPv6(t)
	if len(addrs) < 2 {
		t.Skipf("this host has one address in %s; two are needed (see hostIPv6)", prefix)
	}
	srv := apitest.Start(t, apitest.Options{
		Listen: "[::]:0",
		API:    func(c *api.Config) { c.Limits.RequestsPerSecond, c.Limits.Burst = 0.01, 1 },
	})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for i, from := range addrs[:2] {
		c := http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}).DialContext}}
		resp, err := c.Get("http://" + net.JoinHostPort(from.String(), port) + "/v1/default/entries/" + keyOf("rate"))
		if err != nil {
			t.Fatal(err)
		}
		body := apitest.ReadAll(t, resp)
		want := http.StatusNotFound // the burst of 1, a miss
		if i == 1 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("request %d from %s: %d %s, want %d (%s is one client)", i, from, resp.StatusCode, body, want, prefix)
		}
	}
}

// hostIPv4 returns a non-loopback IPv4 address of this host's, if any.
func hostIPv4() (netip.Addr, bool) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range ifaddrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}
