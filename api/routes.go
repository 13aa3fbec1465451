package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/web"
)

// Access is what a route needs of the caller. It is declared with the route
// (Route.Access) and is the only input to authorization: there is no second
// reading of the path.
type Access struct {
	// Public routes need no token: /healthz, /readyz and the dashboard's
	// files, each listed by name.
	Public bool
	// Scope is the scope the caller's token needs; auth.ScopeNone with
	// Public false means any known token.
	Scope auth.Scope
	// AllNamespaces means the scope is needed on every namespace ("*");
	// otherwise it is needed in the route's {ns}.
	AllNamespaces bool
}

// String renders the access as the OpenAPI document's x-cachesvc-access:
// public, token, read, write, admin, read:* or admin:*.
func (a Access) String() string {
	switch {
	case a.Public:
		return "public"
	case a.Scope == auth.ScopeNone:
		return "token"
	case a.AllNamespaces:
		return a.Scope.String() + ":*"
	}
	return a.Scope.String()
}

// Access rules, by name.
var (
	public   = Access{Public: true}
	anyToken = Access{}
	readNS   = Access{Scope: auth.ScopeRead}
	writeNS  = Access{Scope: auth.ScopeWrite}
	adminNS  = Access{Scope: auth.ScopeAdmin}
	readAll  = Access{Scope: auth.ScopeRead, AllNamespaces: true}
	adminAll = Access{Scope: auth.ScopeAdmin, AllNamespaces: true}
)

// Route is one entry of the route table: a method and fiber path pattern,
// who may call it, and its handler. Every feature group declares its routes
// in one place (its routes method); the server registers exactly these.
type Route struct {
	Method string
	Path   string
	Access Access
	// Upload marks entry uploads, bounded by Limits.MaxConcurrentUploads.
	Upload bool
	// JSONBody marks routes whose handler reads a JSON body (decodeJSON):
	// their cachesvc_request_unknown_fields_total series is exported
	// from the start, and their ?field_validation= is checked before the
	// handler runs (vetFieldValidation).
	JSONBody bool
	// Handler serves the route once the caller is admitted and the request
	// value parsed (request.go).
	Handler fiber.Handler
}

// group is a feature group: it owns its handlers and declares their routes.
type group interface {
	routes() []Route
}

// Routes returns the route table in registration order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.table...) }

// register adds every group's routes to the app, each behind its access
// check, its limits and the request parser. A GET route without a declared
// HEAD route on its path also answers HEAD through the same handlers
// (fasthttp sends the headers and drops the body), as the OpenAPI document
// promises. A request that matches no route is answered by the router (404,
// or 405 for another method), through unmatched: nothing undeclared is
// public.
func (s *Server) register(groups ...group) error {
	seen := map[string]bool{}
	var added []Route
	for _, g := range groups {
		for _, r := range g.routes() {
			id := r.Method + " " + strings.ToLower(r.Path)
			if seen[id] {
				return fmt.Errorf("route %s declared twice", id)
			}
			seen[id] = true
			added = append(added, r)
		}
	}
	s.table = append(s.table, added...)
	parse := parseRequest(s.cfg.Auth == nil)
	for _, r := range added {
		handlers := []fiber.Handler{s.authorize(r.Access), s.limit(r), parse}
		if r.JSONBody {
			handlers = append(handlers, vetFieldValidation)
		}
		handlers = append(handlers, r.Handler)
		s.app.Add(r.Method, r.Path, handlers...)
		if r.Method == http.MethodGet && !seen[http.MethodHead+" "+strings.ToLower(r.Path)] {
			head := append(append([]fiber.Handler(nil), handlers[:len(handlers)-1]...), headOf(r.Handler))
			s.app.Add(http.MethodHead, r.Path, head...)
		}
	}
	return nil
}

// headOf runs a GET handler for HEAD and drops a streamed body (closing
// it, which ends the stream's work): for one of unknown length fasthttp
// would still write the chunked terminator after HEAD's headers, a stray
// line the client would read as the start of its next response.
func headOf(get fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		err := get(c)
		if c.Response().IsBodyStream() {
			c.Response().ResetBody()
		}
		return err
	}
}

// unmatched vets the router's answer err to a request that matched no
// route: when the server checks tokens, a request without a known token
// gets 401 instead, so that no spelling of a path, declared or not, is
// answered without one.
func (s *Server) unmatched(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if s.cfg.Auth == nil || !errors.As(err, &fe) || (fe.Code != http.StatusNotFound && fe.Code != http.StatusMethodNotAllowed) {
		return err
	}
	if _, aerr := s.admit(c, anyToken, ""); aerr != nil {
		return aerr
	}
	return err
}

// assetRoutes lists the dashboard: GET / and one public route per embedded
// file, by name, so that nothing else outside /v1 is public.
func assetRoutes() []Route {
	var names []string
	_ = fs.WalkDir(web.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "index.html" {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	rs := []Route{{Method: http.MethodGet, Path: "/", Access: public, Handler: func(c *fiber.Ctx) error { return serveAsset(c, "index.html") }}}
	for _, n := range names {
		name := n
		rs = append(rs, Route{Method: http.MethodGet, Path: "/assets/" + name, Access: public, Handler: func(c *fiber.Ctx) error { return serveAsset(c, name) }})
	}
	return rs
}
