package api

import (
	"fmt"
	"net/netip"

	"github.com/gofiber/fiber/v2"
)

// clientAddrKey holds, in fiber Locals, the request's client address as
// resolved through Config.TrustedProxies; absent when none are set.
const clientAddrKey = "cachesvc.client"

// resolveClient stores the request's client address for clientAddr when
// the server trusts proxies: the peer, or the client that a trusted peer
// names in X-Forwarded-For. It runs first in the middleware, so every
// limit and record of the request counts the same party.
func (s *Server) resolveClient(c *fiber.Ctx) {
	if s.cfg.TrustedProxies == nil {
		return
	}
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return
	}
	var forwarded []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		forwarded = append(forwarded, string(v))
	}
	c.Locals(clientAddrKey, s.cfg.TrustedProxies.Client(peer, forwarded).String())
}

// clientAddr is the request's client address: what resolveClient found,
// else the connection's peer.
func clientAddr(c *fiber.Ctx) string {
	if a, ok := c.Locals(clientAddrKey).(string); ok {
		return a
	}
	return c.IP()
}

// clientGroup is whom the per-client limits (MaxConnsPerAddr, the
// anonymous rate and upload share, distinct anonymous reporters) count
// ip against: an IPv4 address as itself (an IPv4-mapped IPv6 address as
// its IPv4 address), a global or unique-local IPv6 address as itself or,
// with ipv6Bits under 128 (Limits.IPv6ClientPrefix), as its /ipv6Bits,
// e.g. "2001:db8:1:2::/64", and a link-local IPv6 address as itself
// without its zone, as fe80::/64 is every host on the link.
//
// Each IPv6 address is its own client by default because hosts of one
// network share a prefix: an AWS subnet is one /64 for every instance in
// it, and a Kubernetes node's pods share its range; grouping them by /64
// gave a whole fleet the places of one client. A server facing the
// internet, where one host may hold a /64 and send from any address of
// it, groups with --ipv6-client-prefix 64.
func clientGroup(ip netip.Addr, ipv6Bits int) string {
	ip = ip.Unmap().WithZone("")
	if !ip.Is6() || ip.IsLinkLocalUnicast() || ipv6Bits >= 128 {
		return ip.String()
	}
	return netip.PrefixFrom(ip, ipv6Bits).Masked().String()
}

// requestClientGroup is clientGroup of the request's client address
// (clientAddr); an address that does not parse counts as itself.
func requestClientGroup(c *fiber.Ctx, ipv6Bits int) string {
	a := clientAddr(c)
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	return clientGroup(ip, ipv6Bits)
}

// ipv6Grouping says, for a message, how an IPv6 client address is counted
// when Limits.IPv6ClientPrefix groups them, e.g. " (an IPv6 one counted by
// its /64, --ipv6-client-prefix)"; "" when each address counts alone.
func ipv6Grouping(ipv6Bits int) string {
	if ipv6Bits >= 128 {
		return ""
	}
	return fmt.Sprintf(" (an IPv6 one counted by its /%d, --ipv6-client-prefix)", ipv6Bits)
}
