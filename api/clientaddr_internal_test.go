package api

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cachesvc/cachesvc/api/proxyaddr"
)

// TestClientGroup: IPv6 clients count by /64 (one host holds a whole /64,
// and counted per address it defeated --max-conns-per-addr and the
// anonymous rate), IPv4 and IPv4-mapped IPv6 by address, link-local IPv6
// by address (fe80::/64 is every host on the link).
func TestClientGroup(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fd00::2", "fd00::/64"},
		{"fe80::1%eth0", "fe80::1"},
		{"fe80::2", "fe80::2"},
	} {
		if got := clientGroup(netip.MustParseAddr(tc.in)); got != tc.want {
			t.Errorf("clientGroup(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestPerAddrKey: what a connection counts against for
// --max-conns-per-addr, and which ones are exempt.
func TestPerAddrKey(t *testing.T) {
	trusted, err := proxyaddr.Parse("2001:db8:9::/48, 198.51.100.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr    net.Addr
		key     string
		counted bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7", true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::a"), Port: 1}, "2001:db8:1:2::/64", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::b"), Port: 1}, "2001:db8:1:2::/64", true},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1}, "", false},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:9:1::5"), Port: 1}, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:198.51.100.1"), Port: 1}, "", false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "", false},
	} {
		key, counted := perAddrKey(tc.addr, trusted)
		if key != tc.key || counted != tc.counted {
			t.Errorf("perAddrKey(%s) = %q, %v; want %q, %v", tc.addr, key, counted, tc.key, tc.counted)
		}
	}
}
