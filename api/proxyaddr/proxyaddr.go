// Package proxyaddr finds a request's client address behind reverse
// proxies the operator trusts. Behind nginx or a load balancer every
// connection comes from the proxy, so whatever counts or limits by client
// address (anonymous reporters, rate limits, upload places, the writer of
// an unauthenticated server) would see one party. The proxy names the
// client in X-Forwarded-For; since any client can send that header too, it
// is believed only from the configured proxies, and read from the right:
// each trusted proxy appends the address it received the request from, so
// the rightmost address that is not a trusted proxy is the client, and
// whatever a client wrote to the left of it is ignored.
package proxyaddr

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxHops bounds the X-Forwarded-For entries examined: a chain of proxies
// is a handful, and a header of thousands must not cost thousands of
// parses per request. Past it the last trusted address examined stands.
const maxHops = 32

// Trusted is a set of proxy addresses (CIDR prefixes) whose
// X-Forwarded-For is believed. The nil *Trusted trusts nobody.
type Trusted struct {
	prefixes []netip.Prefix
}

// Parse reads a comma-separated list of CIDR prefixes or single addresses
// ("10.0.0.0/8, 127.0.0.1, fd00::/8"). An empty list gives nil (trust
// nobody); a malformed item is an error that names it.
func Parse(list string) (*Trusted, error) {
	var t Trusted
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parsePrefix(item)
		if err != nil {
			return nil, err
		}
		t.prefixes = append(t.prefixes, p)
	}
	if len(t.prefixes) == 0 {
		return nil, nil
	}
	return &t, nil
}

// parsePrefix reads one CIDR prefix or address; an address is a prefix of
// its full length.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix such as 10.0.0.0/8 or fd00::/8", s)
		}
		if p.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 would match nothing: addresses are
			// compared unmapped.
			return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 prefix: write the IPv4 prefix instead", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor a CIDR prefix such as 10.0.0.0/8", s)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Contains reports whether a is a trusted proxy's address.
func (t *Trusted) Contains(a netip.Addr) bool {
	if t == nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String lists the prefixes as Parse reads them.
func (t *Trusted) String() string {
	if t == nil {
		return ""
	}
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Client returns the client address of a request that arrived from peer
// with the given X-Forwarded-For header lines (in the order received).
// From an untrusted peer, or without the header, it is peer. Otherwise the
// entries are read right to left, skipping trusted proxies: the first
// untrusted one is the client. An entry that is not an address stops the
// walk at the trusted hop that passed it on (what lies to its left cannot
// be told apart from a client's invention), as does the maxHops bound; a
// chain of trusted proxies only gives its leftmost.
func (t *Trusted) Client(peer netip.Addr, forwardedFor []string) netip.Addr {
	peer = peer.Unmap()
	if !t.Contains(peer) {
		return peer
	}
	client, hops := peer, 0
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		line := forwardedFor[i]
		for line != "" {
			var item string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				line, item = line[:j], line[j+1:]
			} else {
				line, item = "", line
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if hops++; hops > maxHops {
				return client
			}
			a, ok := parseHop(item)
			if !ok {
				return client
			}
			client = a
			if !t.Contains(a) {
				return a
			}
		}
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an address, or an address
// with a port ("203.0.113.7:5123", "[2001:db8::1]:5123"), as some proxies
// write them.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}
