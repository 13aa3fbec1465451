package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
)

// identityKey holds the request's auth.Identity in fiber Locals once
// authorize has admitted it.
const identityKey = "cachesvc.identity"

// access is what a request needs: a scope in a namespace ("*" across
// namespaces), or nothing when public.
type access struct {
	public bool
	ns     string
	need   auth.Scope
}

// accessFor decides what method on path needs. It sees the path as the
// router does (lowercased, trailing slashes stripped), so that no spelling
// of a route escapes its rule. Unknown routes fail closed: reading needs
// read on "*", anything else admin on "*". Add a line here when a route's
// needs differ from the defaults below.
func accessFor(method, path string) access {
	path = strings.ToLower(path)
	if len(path) > 1 {
		path = strings.TrimRight(path, "/")
	}
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case path == "/healthz" || path == "/readyz":
		return access{public: true}
	case path == "/metrics":
		return access{ns: auth.AllNamespaces, need: auth.ScopeRead}
	case path != "/v1" && !strings.HasPrefix(path, "/v1/"):
		if read { // the dashboard's static files
			return access{public: true}
		}
		return access{ns: auth.AllNamespaces, need: auth.ScopeAdmin}
	}
	// /v1/<name> is global; /v1/<ns>/... is in a namespace, even when ns
	// is spelled like a global ("/v1/stats/entries/k" is namespace "stats"),
	// exactly as the router reads it.
	seg := strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, "/v1"), "/"), "/")
	switch {
	case len(seg) == 1 && seg[0] == "stats": // every namespace's stats
		return access{ns: auth.AllNamespaces, need: auth.ScopeAdmin}
	case len(seg) < 2 || cachekey.ValidateNamespace(seg[0]) != nil:
		if read {
			return access{ns: auth.AllNamespaces, need: auth.ScopeRead}
		}
		return access{ns: auth.AllNamespaces, need: auth.ScopeAdmin}
	}
	ns, res := seg[0], seg[1]
	switch {
	case res == "entries" && method == http.MethodPut:
		return access{ns: ns, need: auth.ScopeWrite}
	case res == "entries" && method == http.MethodDelete:
		return access{ns: ns, need: auth.ScopeAdmin}
	case res == "leases" && (method == http.MethodPost || method == http.MethodDelete):
		return access{ns: ns, need: auth.ScopeWrite}
	case read:
		return access{ns: ns, need: auth.ScopeRead}
	case method == http.MethodPost && (res == "keys" || res == "lookup" || res == "batch" || res == "exists"):
		return access{ns: ns, need: auth.ScopeRead}
	}
	return access{ns: ns, need: auth.ScopeAdmin}
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, "" when there is none.
func bearerToken(c *fiber.Ctx) (string, error) {
	h := c.Get(fiber.HeaderAuthorization)
	if h == "" {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", errors.New("the Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), nil
}

// authorize admits a request whose token grants what accessFor says the
// route needs and records its identity. Without Config.Auth every request
// is admitted. 401 (with WWW-Authenticate) means no or an unknown token;
// 403 means a known token without the scope. The token itself is never
// logged or echoed.
func (s *Server) authorize(c *fiber.Ctx) error {
	if s.cfg.Auth == nil {
		return c.Next()
	}
	acc := accessFor(c.Method(), c.Path())
	if acc.public {
		return c.Next()
	}
	tok, err := bearerToken(c)
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc", error="invalid_request"`)
		return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: sentence(err.Error())}
	}
	id, err := s.cfg.Auth.Authorize(tok, acc.ns, acc.need)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		// Failed attempts count against the client address, so that a
		// flood of bad tokens meets the rate limit too.
		if lerr := s.rateLimit(c, "addr:"+c.IP()); lerr != nil {
			return lerr
		}
		s.sec.authFailures.WithLabelValues("unauthenticated").Inc()
		if tok == "" {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc"`)
			return Errorf(http.StatusUnauthorized, "unauthorized",
				"This request needs a bearer token: send \"Authorization: Bearer <token>\".")
		}
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc", error="invalid_token"`)
		return Errorf(http.StatusUnauthorized, "unauthorized", "The bearer token is not known to this server.")
	case errors.Is(err, auth.ErrForbidden):
		s.sec.authFailures.WithLabelValues("forbidden").Inc()
		return Errorf(http.StatusForbidden, "forbidden", "Token %q lacks %s scope %s.", id.Name, acc.need, where(acc.ns))
	case err != nil:
		return fmt.Errorf("authorize request: %w", err)
	}
	c.Locals(identityKey, id)
	return c.Next()
}

// where phrases a namespace pattern for an error message.
func where(ns string) string {
	switch ns {
	case auth.AllNamespaces:
		return `on every namespace ("*")`
	}
	return fmt.Sprintf("in namespace %q", ns)
}

// requestIdentity returns who the request was authorized as; ok is false
// when the server runs without authentication.
func requestIdentity(c *fiber.Ctx) (auth.Identity, bool) {
	id, ok := c.Locals(identityKey).(auth.Identity)
	return id, ok
}

// writerName is what an entry records as its writer: the token's name, or
// the client address when the server runs without authentication.
func writerName(c *fiber.Ctx) string {
	if id, ok := requestIdentity(c); ok {
		return id.Name
	}
	return c.IP()
}
