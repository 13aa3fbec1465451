package api

import (
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

// ipv6GroupBits is the prefix length by which IPv6 clients are grouped for
// the per-client limits: a host is routinely given a whole /64 (SLAAC,
// privacy addresses, a container's range), so counting each address apart
// let one host open MaxConnsPerAddr connections from each of 2^64
// addresses, or take a fresh rate bucket with every request.
const ipv6GroupBits = 64

// clientGroup is whom the per-client limits (MaxConnsPerAddr, the
// anonymous rate and upload share, distinct anonymous reporters) count
// ip against: an IPv4 address as itself (an IPv4-mapped IPv6 address as
// its IPv4 address), a global or unique-local IPv6 address as its /64,
// e.g. "2001:db8:1:2::/64", and a link-local IPv6 address as itself
// without its zone, as fe80::/64 is every host on the link.
func clientGroup(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.Is6() || ip.IsLinkLocalUnicast() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, ipv6GroupBits).Masked().String()
}

// requestClientGroup is clientGroup of the request's client address
// (clientAddr); an address that does not parse counts as itself.
func requestClientGroup(c *fiber.Ctx) string {
	a := clientAddr(c)
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	return clientGroup(ip)
}
