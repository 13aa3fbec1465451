package api_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// hostIPv6 returns this host's global or unique-local IPv6 addresses in
// the /64 that has the most of them, or skips the test when it has none.
// A second address in that /64 exists where one was added, e.g. in a
// network namespace, as scripts/test.sh's go suite runs these tests:
//
//	unshare -rn sh -c 'ip link set lo up; ip -6 addr add fd00::2/64 dev lo nodad;
//	  ip -6 addr add fd00::3/64 dev lo nodad; go test -run IPv6 ./api/'
//
// With CACHESVC_REQUIRE_IPV6=1 (set there) a missing address fails the
// test instead of skipping it (skipIPv6).
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
		skipIPv6(t, "this host has no global or unique-local IPv6 address to connect from")
	}
	return prefix, addrs
}

// skipIPv6 skips a test that lacks the IPv6 addresses it needs, or fails it
// when CACHESVC_REQUIRE_IPV6=1 says they were set up for it.
func skipIPv6(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CACHESVC_REQUIRE_IPV6") == "1" {
		t.Fatal(why + " (CACHESVC_REQUIRE_IPV6=1)")
	}
	t.Skip(why)
}

// dualStackDialer serves on [::] (dual stack) with cfg and returns a dial
// that sends a GET from one of this host's addresses to another and
// returns the answer, holding the connection open until the test ends.
func dualStackDialer(t *testing.T, logs io.Writer, cfg func(*api.Config)) func(from, to netip.Addr) (*http.Response, []byte) {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{
		Listen: "[::]:0",
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		API:    cfg,
	})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	return func(from, to netip.Addr) (*http.Response, []byte) {
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
}

// TestMaxConnsPerAddrIPv6: by default each IPv6 address counts against
// --max-conns-per-addr alone, as hosts of one cluster share a /64 (an AWS
// subnet is one /64 for all its instances; a Kubernetes node's pods share
// its range); before, the default grouped by /64, and a fleet in one
// subnet had the places of one client between them: past them, 503.
// With --ipv6-client-prefix 64 (a server facing the internet, where one
// host may hold a /64) another address of the /64 is refused once the /64
// holds its places, and the refusal is logged with the prefix
// (counted_as).
func TestMaxConnsPerAddrIPv6(t *testing.T) {
	prefix, addrs := hostIPv6(t)
	first, other := addrs[0], addrs[len(addrs)-1]
	for _, tc := range []struct {
		name      string
		prefixLen int // Limits.IPv6ClientPrefix
		// otherStatus is the answer to a connection from other while
		// first holds MaxConnsPerAddr; countedAs is what the refusal of
		// a third connection from first is logged as.
		otherStatus int
		countedAs   string
	}{
		{"default, each address alone", 0, 200, first.String()},
		{"by /64", 64, 503, prefix.String()},
		{"by /128, as the default", 128, 200, first.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if first == other && tc.otherStatus == 200 {
				skipIPv6(t, fmt.Sprintf("only %s in %s on this host; two addresses are needed (see hostIPv6)", first, prefix))
			}
			var logs syncBuffer
			dial := dualStackDialer(t, &logs, func(c *api.Config) {
				c.Limits.MaxConns, c.Limits.MaxConnsPerAddr, c.Limits.IPv6ClientPrefix = 20, 2, tc.prefixLen
			})
			for i := 0; i < 2; i++ {
				if resp, body := dial(first, first); resp.StatusCode != 200 {
					t.Fatalf("connection %d from %s: %d %s", i, first, resp.StatusCode, body)
				}
			}
			resp, body := dial(other, first)
			if resp.StatusCode != tc.otherStatus {
				t.Fatalf("connection from %s while %s holds 2: %d %s; want %d", other, first, resp.StatusCode, body, tc.otherStatus)
			}
			if resp.StatusCode == 503 && (errCode(t, body) != "too_many_connections" || !strings.Contains(string(body), "--max-conns-per-addr") || !strings.Contains(string(body), "--ipv6-client-prefix")) {
				t.Fatalf("refusal from %s: %s; want too_many_connections naming --max-conns-per-addr and --ipv6-client-prefix", other, body)
			}
			if resp, body := dial(first, first); resp.StatusCode != 503 {
				t.Fatalf("third connection from %s: %d %s; want 503", first, resp.StatusCode, body)
			}
			if l := logs.String(); !strings.Contains(l, "counted_as="+tc.countedAs+" ") {
				t.Fatalf("the refusal is not logged as counted_as=%s:\n%s", tc.countedAs, l)
			}
		})
	}
}

// TestMaxConnsPerAddrIPv6Exempt: ::1 is loopback, exempt like 127.0.0.1,
// and an IPv4 client reaching the dual-stack listener as ::ffff:a.b.c.d
// counts as its IPv4 address, not as part of any IPv6 prefix.
func TestMaxConnsPerAddrIPv6Exempt(t *testing.T) {
	var logs syncBuffer
	dial := dualStackDialer(t, &logs, func(c *api.Config) {
		c.Limits.MaxConns, c.Limits.MaxConnsPerAddr, c.Limits.IPv6ClientPrefix = 20, 2, 64
	})
	loop := netip.IPv6Loopback()
	for i := 0; i < 3; i++ {
		if resp, body := dial(loop, loop); resp.StatusCode != 200 {
			t.Fatalf("connection %d from ::1: %d %s", i, resp.StatusCode, body)
		}
	}
	v4, ok := hostIPv4()
	if !ok {
		t.Skip("this host has no non-loopback IPv4 address: the IPv4-mapped part is not run")
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

// TestRateIPv6: requests without a token are rate limited per client
// address: by default each IPv6 address has its own bucket (hosts of one
// subnet share its /64; before, they shared one bucket and got 429 for
// each other's requests), and with --ipv6-client-prefix 64 the /64 has
// one, so a host holding it gets no fresh burst with every address.
func TestRateIPv6(t *testing.T) {
	prefix, addrs := hostIPv6(t)
	if len(addrs) < 2 {
		skipIPv6(t, fmt.Sprintf("this host has one address in %s; two are needed (see hostIPv6)", prefix))
	}
	for _, tc := range []struct {
		name       string
		prefixLen  int
		secondAddr int // the answer to the second address's first request
	}{
		{"default, each address alone", 0, http.StatusNotFound},
		{"by /64", 64, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := apitest.Start(t, apitest.Options{
				Listen: "[::]:0",
				API: func(c *api.Config) {
					c.Limits.RequestsPerSecond, c.Limits.Burst, c.Limits.IPv6ClientPrefix = 0.01, 1, tc.prefixLen
				},
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
					want = tc.secondAddr
				}
				if resp.StatusCode != want {
					t.Fatalf("request %d from %s: %d %s, want %d", i, from, resp.StatusCode, body, want)
				}
				if resp.StatusCode == http.StatusTooManyRequests && !strings.Contains(string(body), "--ipv6-client-prefix") {
					t.Fatalf("429 from %s does not say it counts by --ipv6-client-prefix: %s", from, body)
				}
			}
		})
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
