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

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header, "" when there is none.
func bearerToken(c *fiber.Ctx) (string, error) {
	return parseBearer(c.Get(fiber.HeaderAuthorization))
}

// parseBearer returns the token of an Authorization header's value h, ""
// when h is empty.
func parseBearer(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", errors.New("the Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), nil
}

// authorize returns the middleware that admits a request to a route with
// access acc, deciding from the declaration alone. Without Config.Auth
// every request is admitted.
func (s *Server) authorize(acc Access) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Locals(routedKey, true)
		if s.cfg.Auth == nil || acc.Public {
			return c.Next()
		}
		// A namespace that does not decode is refused by the request
		// parser; until then it needs the scope on every namespace.
		ns, _ := pathParam(c, "ns")
		id, err := s.admit(c, acc, accessNamespace(acc, ns))
		if err != nil {
			return err
		}
		c.Locals(identityKey, id)
		return c.Next()
	}
}

// accessNamespace returns the namespace a route with access acc needs its
// scope in, given the route's {ns} parameter p ("" on routes without one).
func accessNamespace(acc Access, p string) string {
	// An invalid {ns} is refused by the request parser after the access
	// check; until then it needs the scope on every namespace.
	if acc.AllNamespaces || cachekey.ValidateNamespace(p) != nil {
		return auth.AllNamespaces
	}
	return p
}

// admit checks the request's token against acc in namespace ns. 401 (with
// WWW-Authenticate) means no or an unknown token; 403 a known token without
// the scope. The token itself is never logged or echoed.
func (s *Server) admit(c *fiber.Ctx, acc Access, ns string) (auth.Identity, error) {
	tok, err := bearerToken(c)
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc", error="invalid_request"`)
		return auth.Identity{}, &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: sentence(err.Error())}
	}
	id, err := s.checkToken(tok, acc, ns)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		// Failed attempts count against the client address, so that a
		// flood of bad tokens meets the rate limit too.
		if lerr := s.rateLimit(c, "addr:"+requestClientGroup(c, s.cfg.Limits.IPv6ClientPrefix)); lerr != nil {
			return id, lerr
		}
		s.sec.authFailures.WithLabelValues("unauthenticated").Inc()
		if tok == "" {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc"`)
			return id, Errorf(http.StatusUnauthorized, "unauthorized",
				"This request needs a bearer token: send \"Authorization: Bearer <token>\".")
		}
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cachesvc", error="invalid_token"`)
		return id, Errorf(http.StatusUnauthorized, "unauthorized", "The bearer token is not known to this server.")
	case errors.Is(err, auth.ErrForbidden):
		s.sec.authFailures.WithLabelValues("forbidden").Inc()
		return id, Errorf(http.StatusForbidden, "forbidden", "Token %q lacks %s scope %s.", id.Name, acc.Scope, where(ns))
	case err != nil:
		return id, fmt.Errorf("authorize request: %w", err)
	}
	return id, nil
}

// checkToken checks tok against acc in namespace ns, with no side effect:
// auth.ErrUnauthenticated, auth.ErrForbidden or nil.
func (s *Server) checkToken(tok string, acc Access, ns string) (auth.Identity, error) {
	if acc.Scope == auth.ScopeNone {
		return s.cfg.Auth.Authenticate(tok)
	}
	return s.cfg.Auth.Authorize(tok, ns, acc.Scope)
}

// where phrases a namespace pattern for an error message.
func where(ns string) string {
	if ns == auth.AllNamespaces {
		return `on every namespace ("*")`
	}
	return fmt.Sprintf("in namespace %q", ns)
}

// requestIdentity returns who the request was authorized as; ok is false
// when the server runs without authentication or the route is public.
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
	return clientAddr(c)
}
