package api

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cachesvc/cachesvc/api/proxyaddr"
)

// TestClientGroup: by default each IPv6 address counts alone (hosts of
// one network share a /64: an AWS subnet, a Kubernetes node's pods), and
// by its /N under --ipv6-client-prefix N; IPv4 and IPv4-mapped IPv6 count
// by address, link-local IPv6 by address (fe80::/64 is every host on the
// link) whatever the prefix.
func TestClientGroup(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bits int
		want string
	}{
		{"192.0.2.7", 128, "192.0.2.7"},
		{"192.0.2.7", 64, "192.0.2.7"},
		{"::ffff:192.0.2.7", 64, "192.0.2.7"},
		{"2001:db8:1:2::1", 128, "2001:db8:1:2::1"},
		{"2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", 64, "2001:db8:1:3::/64"},
		{"2001:db8:1:2::7:1", 96, "2001:db8:1:2::/96"},
		{"2001:db8:1:2::1", 48, "2001:db8:1::/48"},
		{"fd00::2", 128, "fd00::2"},
		{"fd00::2", 64, "fd00::/64"},
		{"fe80::1%eth0", 64, "fe80::1"},
		{"fe80::2", 64, "fe80::2"},
	} {
		if got := clientGroup(netip.MustParseAddr(tc.in), tc.bits); got != tc.want {
			t.Errorf("clientGroup(%s, %d) = %s, want %s", tc.in, tc.bits, got, tc.want)
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
		addr     net.Addr
		ipv6Bits int
		key      string
		counted  bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, 64, "192.0.2.7", true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, 64, "192.0.2.7", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::a"), Port: 1}, 64, "2001:db8:1:2::/64", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::b"), Port: 1}, 64, "2001:db8:1:2::/64", true},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::b"), Port: 1}, 128, "2001:db8:1:2::b", true},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}, 64, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, 64, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1}, 64, "", false},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:9:1::5"), Port: 1}, 64, "", false},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:198.51.100.1"), Port: 1}, 64, "", false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, 64, "", false},
	} {
		key, counted := perAddrKey(tc.addr, trusted, tc.ipv6Bits)
		if key != tc.key || counted != tc.counted {
			t.Errorf("perAddrKey(%s, %d) = %q, %v; want %q, %v", tc.addr, tc.ipv6Bits, key, counted, tc.key, tc.counted)
		}
	}
}
