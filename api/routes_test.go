package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/wire"
)

// caller is one identity of the route walk: the test tokens
// (security_test.go) hold scopes in "default" or on "*".
type caller struct {
	name  string
	tok   authtest.Token
	nsHas auth.Scope // in "default" (a "*" scope counts there too)
	all   auth.Scope // on "*"
}

// allowed reports whether c passes access acc in namespace "default".
func (c caller) allowed(acc api.Access) bool {
	switch {
	case acc.Public:
		return true
	case c.tok.Secret == "":
		return false
	case acc.Scope == auth.ScopeNone:
		return true // any known token
	case acc.AllNamespaces:
		return c.all >= acc.Scope
	}
	return max(c.nsHas, c.all) >= acc.Scope
}

// TestRouteAccessTable walks every registered route with no token, a read
// token, a write token and an admin token and checks each answer against
// the route's declared access: 401 without a token where one is needed,
// 403 for a token without the scope, neither where the declaration allows.
func TestRouteAccessTable(t *testing.T) {
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{tokWriter, tokReader, tokAdmin}, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Auth = g }})
	fill := strings.NewReplacer(":ns", "default", ":key", strings.Repeat("ab", 32), ":run", "r1")
	callers := []caller{
		{"no token", authtest.Token{}, auth.ScopeNone, auth.ScopeNone},
		{"read token (*:read)", tokReader, auth.ScopeNone, auth.ScopeRead},
		{"write token (default:write)", tokWriter, auth.ScopeWrite, auth.ScopeNone},
		{"admin token (*:admin)", tokAdmin, auth.ScopeNone, auth.ScopeAdmin},
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
			switch want := c.allowed(r.Access); {
			case want && (got == http.StatusUnauthorized || got == http.StatusForbidden):
				t.Errorf("%s %s (%s) with %s = %d, want admitted", r.Method, r.Path, r.Access, c.name, got)
			case !want && c.tok.Secret == "" && got != http.StatusUnauthorized:
				t.Errorf("%s %s (%s) with %s = %d, want 401", r.Method, r.Path, r.Access, c.name, got)
			case !want && c.tok.Secret != "" && got != http.StatusForbidden:
				t.Errorf("%s %s (%s) with %s = %d, want 403", r.Method, r.Path, r.Access, c.name, got)
			}
		}
	}
}

// TestHeadOnEveryGetRoute holds the OpenAPI document's promise that each GET
// route also answers HEAD: the same status and Content-Type as GET, no body
// (an error's code in X-Cachesvc-Error instead), and HEAD among the methods
// a 405 names in Allow.
func TestHeadOnEveryGetRoute(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	fill := strings.NewReplacer(":ns", "default", ":key", strings.Repeat("ab", 32), ":run", "r1")
	n, errs := 0, 0
	for _, r := range srv.API.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		n++
		url := srv.URL + fill.Replace(r.Path)
		get := srv.Do(http.MethodGet, url, nil)
		getBody := apitest.ReadAll(t, get)
		head := srv.Do(http.MethodHead, url, nil)
		body := apitest.ReadAll(t, head)
		if head.StatusCode != get.StatusCode || len(body) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s = %d %q with %d body bytes; GET = %d %q", r.Path, head.StatusCode, head.Header.Get("Content-Type"), len(body), get.StatusCode, get.Header.Get("Content-Type"))
		}
		var e wire.ErrorBody
		if get.StatusCode >= 400 && json.Unmarshal(getBody, &e) == nil {
			errs++
			if got := head.Header.Get(wire.HeaderError); got != e.Error.Code {
				t.Errorf("HEAD %s = %d with %s %q; GET's code is %q", r.Path, head.StatusCode, wire.HeaderError, got, e.Error.Code)
			}
		} else if got := head.Header.Get(wire.HeaderError); got != "" {
			t.Errorf("HEAD %s = %d with %s %q", r.Path, head.StatusCode, wire.HeaderError, got)
		}
		resp := srv.Do(http.MethodPatch, url, nil)
		msg := apitest.ReadAll(t, resp)
		if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), http.MethodHead) {
			t.Errorf("PATCH %s = %d, Allow %q; want 405 naming HEAD", r.Path, resp.StatusCode, resp.Header.Get("Allow"))
		}
		if !strings.Contains(string(msg), "use "+resp.Header.Get("Allow")) {
			t.Errorf("PATCH %s: body %s does not name the allowed methods %q", r.Path, msg, resp.Header.Get("Allow"))
		}
	}
	if n < 10 || errs == 0 {
		t.Fatalf("only %d GET routes registered, %d of them errors", n, errs)
	}
}

// TestClientHeadNamesTheErrorCode: the Go client's Head reads a miss's code
// from X-Cachesvc-Error, HEAD's answer having no body, so a missing entry
// (not_found) and a wrong path (route_not_found) are told apart.
func TestClientHeadNamesTheErrorCode(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	for _, tc := range []struct{ base, code string }{{srv.URL, "not_found"}, {srv.URL + "/v1", "route_not_found"}} {
		_, err := newClient(t, tc.base, "").Head(context.Background(), "default", strings.Repeat("cd", 32))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != tc.code {
			t.Errorf("Head with base %s: %v, want 404 %s", tc.base, err, tc.code)
		}
	}
}

// TestUnknownMethodIsJSON checks that a method fiber does not know (WebDAV's
// PROPFIND, a lowercase get) gets the documented JSON 400 bad_request, not
// fiber's text/plain "Invalid http method", and that the connection still
// serves the next request. Each is logged as one request line and counted
// in the request metrics, every unknown method under the one method label
// _other (a label per method sent would be unbounded).
func TestUnknownMethodIsJSON(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	methods := []string{"PROPFIND", "get", "FOO"}
	for _, m := range methods {
		resp := srv.Do(m, srv.URL+"/v1/stats", nil)
		body := apitest.ReadAll(t, resp)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadRequest || e.Error.Code != "bad_request" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(e.Error.Message, "GET") {
			t.Errorf("%s /v1/stats = %d %q %s; want 400 JSON bad_request naming the methods", m, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp := srv.Do(http.MethodGet, srv.URL+"/healthz", nil)
	apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz after an unknown method = %d", resp.StatusCode)
	}
	for _, m := range methods {
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=request") && strings.HasSuffix(l, " unknown_method="+m) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "status=400") || !strings.Contains(lines[0], "method=_other") {
			t.Errorf("log lines of %s: %q, want one request line with status=400 method=_other; logs:\n%s", m, lines, logs.String())
		}
	}
	m := string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil)))
	want := fmt.Sprintf(`cachesvc_http_requests_total{method="_other",route="unmatched",status="400"} %d`, len(methods))
	if !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s; request lines:\n%s", want, grepLines(m, "cachesvc_http_requests_total"))
	}
	for _, meth := range methods {
		if strings.Contains(m, `method="`+meth+`"`) {
			t.Errorf("/metrics has a method label %q: unknown methods must fold into _other", meth)
		}
	}
}

// TestHeadOfStreamedBody asks HEAD of the export, whose GET body is a stream
// of unknown length, and a GET on the same connection: the HEAD answer ends
// with its headers (no stray chunk terminator the next response would start
// with), and the dropped stream is closed, so the server shuts down cleanly.
func TestHeadOfStreamedBody(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	if resp, body := put(t, srv, "default", keyOf("exported"), 1, 1000); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "HEAD /v1/default/export HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	head, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil || head.StatusCode != http.StatusOK || head.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("HEAD /v1/default/export = %v, %v; want 200 application/x-tar", head, err)
	}
	next, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the response after HEAD's: %v", err)
	}
	body, _ := io.ReadAll(next.Body)
	if next.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("GET /healthz after HEAD = %d %s", next.StatusCode, body)
	}
	conn.Close()
	srv.Close() // fails the test if the dropped export is still counted in flight
}
