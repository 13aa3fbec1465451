package proxyaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "", want: ""},
		{in: " , ", want: ""},
		{in: "127.0.0.1", want: "127.0.0.1/32"},
		{in: "10.1.2.3/8, ::1", want: "10.0.0.0/8,::1/128"},
		{in: "fd00::/8,192.168.0.0/16", want: "fd00::/8,192.168.0.0/16"},
		{in: "::ffff:10.0.0.1", want: "10.0.0.1/32"},
		{in: "10.0.0.0/33", err: `"10.0.0.0/33" is not a CIDR prefix`},
		{in: "nginx", err: `"nginx" is neither an IP address nor a CIDR prefix`},
		{in: "127.0.0.1,localhost", err: `"localhost" is neither`},
		{in: "::ffff:10.0.0.0/104", err: "write the IPv4 prefix instead"},
	} {
		got, err := Parse(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("Parse(%q): %v", tc.in, err)
		case got.String() != tc.want:
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		case tc.want == "" && got != nil:
			t.Errorf("Parse(%q) = non-nil, want nil (trust nobody)", tc.in)
		}
	}
}

func TestClient(t *testing.T) {
	trusted, err := Parse("127.0.0.0/8,10.0.0.0/8,2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	many := strings.Repeat("10.0.0.9, ", 40) + "10.0.0.8"
	for _, tc := range []struct {
		name    string
		trusted *Trusted
		peer    string
		xff     []string
		want    string
	}{
		{"nobody trusted: header ignored", nil, "127.0.0.1", []string{"203.0.113.7"}, "127.0.0.1"},
		{"untrusted peer: header ignored", trusted, "198.51.100.2", []string{"203.0.113.7"}, "198.51.100.2"},
		{"trusted peer, no header", trusted, "127.0.0.1", nil, "127.0.0.1"},
		{"one proxy", trusted, "127.0.0.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"client's own header to the left is ignored", trusted, "127.0.0.1", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"two trusted proxies", trusted, "127.0.0.1", []string{"198.51.100.1, 203.0.113.7, 10.0.0.5"}, "203.0.113.7"},
		{"several header lines", trusted, "127.0.0.1", []string{"198.51.100.1", "203.0.113.7", "10.0.0.5"}, "203.0.113.7"},
		{"only trusted hops: the leftmost", trusted, "127.0.0.1", []string{"10.0.0.7, 10.0.0.5"}, "10.0.0.7"},
		{"garbage stops at the hop that passed it", trusted, "127.0.0.1", []string{"unknown, 10.0.0.5"}, "10.0.0.5"},
		{"garbage from the client itself", trusted, "127.0.0.1", []string{"<script>"}, "127.0.0.1"},
		{"empty entries skipped", trusted, "127.0.0.1", []string{" , 203.0.113.7 ,"}, "203.0.113.7"},
		{"address with port", trusted, "127.0.0.1", []string{"203.0.113.7:5123"}, "203.0.113.7"},
		{"IPv6 with port", trusted, "127.0.0.1", []string{"[2001:db8::1]:5123"}, "2001:db8::1"},
		{"IPv6 in brackets", trusted, "127.0.0.1", []string{"[2001:db8::1]"}, "2001:db8::1"},
		{"IPv6 proxy", trusted, "2001:db8:ffff::2", []string{"2001:db8::1"}, "2001:db8::1"},
		{"mapped peer", trusted, "::ffff:127.0.0.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"mapped hop", trusted, "127.0.0.1", []string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{"hops bounded", trusted, "127.0.0.1", []string{"203.0.113.7, " + many}, "10.0.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.trusted.Client(netip.MustParseAddr(tc.peer), tc.xff)
			if got.String() != tc.want {
				t.Errorf("Client(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
}
