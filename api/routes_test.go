package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// Tokens of the route walk: scoped to one namespace, and one on every
// namespace.
var (
	walkReader = authtest.Token{Name: "walk-reader", Secret: "walk-reader-secret-1", Scopes: "team-a:read"}
	walkWriter = authtest.Token{Name: "walk-writer", Secret: "walk-writer-secret-2", Scopes: "team-a:write"}
	walkAdmin  = authtest.Token{Name: "walk-admin", Secret: "walk-admin-secret-3", Scopes: "*:admin"}
)

// allowed reports whether a token with the given scopes in team-a (and
// admin on "*" when all is set) passes access acc.
func allowed(acc api.Access, have auth.Scope, all bool) bool {
	switch {
	case acc.Public:
		return true
	case all:
		return true // walkAdmin: admin on every namespace
	case have == auth.ScopeNone:
		return false // no token
	case acc.Scope == auth.ScopeNone:
		return true // any known token
	case acc.AllNamespaces:
		return false // the scoped tokens hold nothing on "*"
	}
	return have >= acc.Scope
}

// TestRouteAccessTable walks every registered route with no token, a read
// token, a write token and an admin token and checks each answer against
// the route's declared access: 401 without a token where one is needed,
// 403 for a token without the scope, neither where the declaration allows.
func TestRouteAccessTable(t *testing.T) {
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{walkReader, walkWriter, walkAdmin}, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Auth = g }})
	fill := strings.NewReplacer(":ns", "team-a", ":key", strings.Repeat("ab", 32), ":run", "r1")
	callers := []struct {
		name string
		tok  authtest.Token
		have auth.Scope
		all  bool
	}{
		{"no token", authtest.Token{}, auth.ScopeNone, false},
		{"read token", walkReader, auth.ScopeRead, false},
		{"write token", walkWriter, auth.ScopeWrite, false},
		{"admin token", walkAdmin, auth.ScopeAdmin, true},
	}
	routes := srv.API.Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	for _, r := range routes {
		if !r.Access.Public && strings.HasPrefix(r.Path, "/assets/") {
			t.Errorf("dashboard file %s is not public", r.Path)
		}
		for _, c := range callers {
			body := strings.NewReader(`{"keys": ["` + strings.Repeat("ab", 32) + `"]}`)
			resp := srv.Do(r.Method, srv.URL+fill.Replace(r.Path), body, bearer(c.tok)...)
			apitest.ReadAll(t, resp)
			got := resp.StatusCode
			switch want := allowed(r.Access, c.have, c.all); {
			case want && (got == http.StatusUnauthorized || got == http.StatusForbidden):
				t.Errorf("%s %s (%s) with %s = %d, want admitted", r.Method, r.Path, r.Access, c.name, got)
			case !want && c.have == auth.ScopeNone && got != http.StatusUnauthorized:
				t.Errorf("%s %s (%s) with %s = %d, want 401", r.Method, r.Path, r.Access, c.name, got)
			case !want && c.have != auth.ScopeNone && got != http.StatusForbidden:
				t.Errorf("%s %s (%s) with %s = %d, want 403", r.Method, r.Path, r.Access, c.name, got)
			}
		}
	}
}
