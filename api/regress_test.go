package api_test

// Regression tests for the bugs found by trying the server as a new user
// would (issue 12). Each talks to a real server over HTTP only, so that it
// also runs against the code before the fix (where it fails).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// statsJSON fetches GET path (with headers, name then value) and decodes it
// as a generic JSON object.
func statsJSON(t *testing.T, srv *apitest.Server, path string, headers ...string) map[string]any {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.URL+path, nil, headers...)
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return m
}

// totalsOf returns the "totals" object of a stats response.
func totalsOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	tot, ok := m["totals"].(map[string]any)
	if !ok {
		t.Fatalf("stats response has no totals object: %v", m)
	}
	return tot
}

// metricsOK scrapes /metrics and fails unless it answers 200 with valid
// UTF-8.
func metricsOK(t *testing.T, srv *apitest.Server) string {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.URL+"/metrics", nil)
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d: %.300s", resp.StatusCode, body)
	}
	if !utf8.Valid(body) {
		t.Fatalf("/metrics is not valid UTF-8")
	}
	return string(body)
}

// Bug 1: a non-UTF-8 X-Cachesvc-Backend broke /metrics for good.
// Bug 7: a non-UTF-8 X-Cachesvc-Name was accepted and stored.
func TestBadLabelHeadersRefused(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("bad-labels")
	for _, tc := range []struct{ method, line string }{
		{http.MethodGet, wire.HeaderBackend + ": \xff"},
		{http.MethodPut, wire.HeaderBackend + ": \xff"},
		{http.MethodPut, wire.HeaderBackend + ": XLA with spaces"},
		{http.MethodPut, wire.HeaderName + ": jit_\xff"},
		{http.MethodPut, wire.HeaderName + ": a\x01b"},
		{http.MethodGet, wire.HeaderRun + ": \xff"},
	} {
		header, _, _ := strings.Cut(tc.line, ":")
		status, body := rawRequest(t, srv, tc.method, "/v1/default/entries/"+key, tc.line, "bytes")
		if status != http.StatusBadRequest || !strings.Contains(body, header) {
			t.Errorf("%s with %q = %d %s, want 400 naming the header", tc.method, tc.line, status, body)
		}
	}
	metricsOK(t, srv)
	resp := srv.Do(http.MethodGet, srv.EntryURL("default", key), nil)
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an entry was stored by a refused PUT: GET = %d", resp.StatusCode)
	}
	for _, b := range backendsOf(t, statsJSON(t, srv, "/v1/stats")) {
		if !utf8.ValidString(b) || strings.ContainsRune(b, utf8.RuneError) {
			t.Errorf("/v1/stats lists backend %q", b)
		}
	}
}

// rawRequest sends one request over a raw connection (Go's client refuses
// header values that are not valid, which is what these tests send) and
// returns the status and body.
func rawRequest(t *testing.T, srv *apitest.Server, method, path, header, body string) (int, string) {
	t.Helper()
	c := rawConn(t, srv)
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, header, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, string(apitest.ReadAll(t, resp))
}

// backendsOf lists the backend names of a stats response.
func backendsOf(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	bs, _ := m["backends"].([]any)
	for _, b := range bs {
		if o, ok := b.(map[string]any); ok {
			name, _ := o["backend"].(string)
			out = append(out, name)
		}
	}
	return out
}

// Bug 2: X-Compile-Seconds: 1e308 was accepted and made the saved totals
// negative.
func TestCompileSecondsCeiling(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("huge-compile")
	for _, v := range []string{"1e308", "604801", "-1", "NaN", "Inf"} {
		resp := srv.Do(http.MethodPut, srv.EntryURL("default", key), strings.NewReader("x"), wire.HeaderCompileSeconds, v)
		body := apitest.ReadAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "604800") {
			t.Errorf("PUT with %s: %s = %d %s, want 400 naming the ceiling", wire.HeaderCompileSeconds, v, resp.StatusCode, body)
		}
	}
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", key), strings.NewReader("x"), wire.HeaderCompileSeconds, "604800")
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT at the ceiling = %d", resp.StatusCode)
	}
	for i := 0; i < 3; i++ {
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", key), nil))
	}
	saved, _ := totalsOf(t, statsJSON(t, srv, "/v1/stats"))["compile_seconds_saved"].(float64)
	if saved != 3*604800 {
		t.Errorf("compile_seconds_saved = %v after three hits at the ceiling, want %v", saved, 3*604800)
	}
}

// Bug 3: hits served by POST /v1/{ns}/batch never reached the saved
// statistics.
func TestBatchHitsCounted(t *testing.T) {
	srv := statstest.StartWith(t, nil, nil)
	var keys []string
	for i := 0; i < 3; i++ {
		k := keyOf(fmt.Sprint("batch-counted-", i))
		keys = append(keys, k)
		resp := srv.Do(http.MethodPut, srv.EntryURL("default", k), strings.NewReader("executable"), wire.HeaderCompileSeconds, "10")
		apitest.ReadAll(t, resp)
	}
	body, _ := json.Marshal(map[string]any{"keys": append(keys, keyOf("batch-missing"))})
	resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/batch", bytes.NewReader(body))
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("batch = %d", resp.StatusCode)
	}
	tot := totalsOf(t, statsJSON(t, srv.Server, "/v1/stats"))
	if tot["hits"] != 3.0 || tot["misses"] != 1.0 || tot["compile_seconds_saved"] != 30.0 || tot["bytes_out"] != 30.0 {
		t.Errorf("totals after a batch of 3 hits and 1 miss: %v", tot)
	}
}

// Bug 4: /v1/stats carried two sets of totals that disagreed, one of which
// reset on restart.
func TestOneSetOfTotals(t *testing.T) {
	srv := statstest.StartWith(t, nil, nil)
	key := keyOf("one-set")
	apitest.ReadAll(t, srv.Do(http.MethodPut, srv.EntryURL("default", key), strings.NewReader("x")))
	apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", key), nil))
	apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("absent")), nil))
	before := statsJSON(t, srv.Server, "/v1/stats")
	for _, flat := range []string{"requests", "hits", "misses", "hit_rate", "bytes_out", "puts_created"} {
		if _, ok := before[flat]; ok {
			t.Errorf("/v1/stats has a second, top-level %q beside totals", flat)
		}
	}
	srv.Restart()
	after := statsJSON(t, srv.Server, "/v1/stats")
	b, a := totalsOf(t, before), totalsOf(t, after)
	for _, f := range []string{"lookups", "hits", "misses", "writes", "bytes_out"} {
		if a[f] != b[f] {
			t.Errorf("totals.%s = %v before the restart, %v after", f, b[f], a[f])
		}
	}
}

// Bug 6: a 304 and a 10-byte Range each credited a whole compile saved and
// the full size as bytes out.
func TestPartialHitsSaveNoCompile(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("partial")
	data := strings.Repeat("e", 1000)
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", key), strings.NewReader(data), wire.HeaderCompileSeconds, "50")
	apitest.ReadAll(t, resp)
	etag := resp.Header.Get("ETag")
	resp = srv.Do(http.MethodGet, srv.EntryURL("default", key), nil, "Range", "bytes=0-9")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusPartialContent || len(b) != 10 {
		t.Fatalf("range = %d, %d bytes", resp.StatusCode, len(b))
	}
	resp = srv.Do(http.MethodGet, srv.EntryURL("default", key), nil, "If-None-Match", etag)
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match = %d", resp.StatusCode)
	}
	tot := totalsOf(t, statsJSON(t, srv, "/v1/stats"))
	if tot["hits"] != 2.0 || tot["compile_seconds_saved"] != 0.0 || tot["bytes_out"] != 10.0 {
		t.Errorf("after a 10-byte range and a 304: %v; want 2 hits, 0 s saved, 10 bytes out", tot)
	}
	apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", key), nil))
	tot = totalsOf(t, statsJSON(t, srv, "/v1/stats"))
	if tot["compile_seconds_saved"] != 50.0 || tot["bytes_out"] != 1010.0 {
		t.Errorf("after a full GET too: %v; want 50 s saved, 1010 bytes out", tot)
	}
}

// Bug 8: every GET outside /v1/ was public even with tokens, so the next
// route added outside /v1 would serve without authentication.
// Bug 10: auth-rejected requests were labelled route="/" in the metrics.
func TestUndeclaredRoutesNeedToken(t *testing.T) {
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{tokAdmin}, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Auth = g }})
	for _, path := range []string{"/cas/" + keyOf("x"), "/ac/whatever", "/assets/no-such-file.js", "/index.html"} {
		resp := srv.Do(http.MethodGet, srv.URL+path, nil)
		if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d %s, want 401", path, resp.StatusCode, body)
		}
		resp = srv.Do(http.MethodGet, srv.URL+path, nil, bearer(tokAdmin)...)
		if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with a token = %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/", "/healthz", "/readyz"} {
		resp := srv.Do(http.MethodGet, srv.URL+path, nil)
		if apitest.ReadAll(t, resp); resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("public GET %s = 401", path)
		}
	}
	apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("x")), nil))
	resp := srv.Do(http.MethodGet, srv.URL+"/metrics", nil, bearer(tokAdmin)...)
	m := string(apitest.ReadAll(t, resp))
	want := `cachesvc_http_requests_total{method="GET",route="/v1/:ns/entries/:key",status="401"} 1`
	if !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s; request lines:\n%s", want, grepLines(m, "cachesvc_http_requests_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Bug 9: one GET miss in any valid-looking namespace created a namespace in
// the statistics, so a reader could push the real namespaces into _other.
// A read-only token's misses admit nothing (a writer's do: see
// TestWritersLookupsAdmitTheirNamespace).
func TestMissesDoNotCreateNamespaces(t *testing.T) {
	writer := authtest.Token{Name: "team-a-ci", Secret: "s3cr3t-team-a-5e0b", Scopes: "team-a:write"}
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{writer, tokReader, tokAdmin}, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := statstest.StartWith(t, nil, func(c *api.Config) { c.Auth = g })
	apitest.ReadAll(t, srv.Do(http.MethodPut, srv.EntryURL("team-a", keyOf("real")), strings.NewReader("x"), bearer(writer)...))
	for i := 0; i < 70; i++ {
		ns := fmt.Sprintf("%s%02d", strings.Repeat("a", 61), i)
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL(ns, keyOf("nothing")), nil, bearer(tokReader)...))
	}
	apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("team-a", keyOf("real")), nil, bearer(tokReader)...))
	m := statsJSON(t, srv.Server, "/v1/stats", bearer(tokAdmin)...)
	nss, _ := m["namespaces"].([]any)
	var names []string
	for _, n := range nss {
		o, _ := n.(map[string]any)
		name, _ := o["namespace"].(string)
		names = append(names, name)
		if strings.HasPrefix(name, "aaaa") {
			t.Errorf("a miss created namespace %q in the stats", name)
			break
		}
	}
	if !strings.Contains(strings.Join(names, ","), "team-a") {
		t.Errorf("namespace team-a, which holds an entry, is not listed: %v", names)
	}
	if tot := totalsOf(t, m); tot["misses"] != 70.0 || tot["hits"] != 1.0 {
		t.Errorf("totals = %v, want the 70 misses and 1 hit counted", tot)
	}
}

// Bug 5: in jax-key (passthrough) mode every miss was "explained" by naming
// an unrelated entry with identical components.
func TestPassthroughMissesNameNoEntry(t *testing.T) {
	keyer := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	srv := statstest.StartWith(t, nil, func(c *api.Config) { c.Keyer = keyer })
	lookup := func(jaxKey string) (int, map[string]any) {
		sig, _ := json.Marshal(map[string]string{"backend": "passthrough", "kind": "jax", "key": jaxKey})
		resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/lookup", bytes.NewReader(sig), "Content-Type", "application/json")
		var m map[string]any
		json.Unmarshal(apitest.ReadAll(t, resp), &m)
		return resp.StatusCode, m
	}
	code, m := lookup("jit_f-" + strings.Repeat("1", 64))
	if code != http.StatusNotFound {
		t.Fatalf("first lookup = %d %v", code, m)
	}
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", m["key"].(string)), strings.NewReader("executable"))
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d", resp.StatusCode)
	}
	code, m = lookup("jit_g-" + strings.Repeat("2", 64))
	ex, _ := m["explanation"].(map[string]any)
	if code != http.StatusNotFound || ex == nil {
		t.Fatalf("second lookup = %d %v", code, m)
	}
	if near, _ := ex["nearest"].([]any); len(near) > 0 {
		t.Errorf("a passthrough miss names entries it cannot be compared with: %v", ex)
	}
	if ex["reason"] != "not_comparable" || !strings.Contains(fmt.Sprint(ex["summary"]), "nothing to compare") {
		t.Errorf("explanation = %v; want reason not_comparable saying there is nothing to compare", ex)
	}
}
