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
