package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// missesByNamespace returns the misses of each namespace row of
// GET /v1/stats, read with tok (an admin's where tokens are checked).
func missesByNamespace(t *testing.T, srv *apitest.Server, tok authtest.Token) map[string]int64 {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/stats", nil, bearer(tok)...)
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/stats: %d %s", resp.StatusCode, body)
	}
	var st wire.StatsResponse
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, n := range st.Namespaces {
		got[n.Namespace] = n.Misses
	}
	return got
}

// TestWritersLookupsAdmitTheirNamespace: a sweep's first lookups in a fresh
// namespace all miss before anything is written there, and they were
// counted under _other, so the namespace's own numbers came up short (6 of
// 54 misses of a 6-arm sweep). A lookup by a caller that may write in the
// namespace now admits it, on every lookup route; a read-only caller's
// (a token's or anonymous) still does not, and the cap on tracked
// namespaces still holds.
func TestWritersLookupsAdmitTheirNamespace(t *testing.T) {
	sweeper := authtest.Token{Name: "sweeper", Secret: "s3cr3t-sweeper-4d1e", Scopes: "*:write"}
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{sweeper, tokReader, tokAdmin}, "public"), nil)
	if err != nil {
		t.Fatal(err)
	}
	keyer := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	// default and four more: the last writer's namespace below is beyond
	// the cap.
	srv := statstest.StartWith(t, func(c *stats.Config) { c.MaxNamespaces = 5 }, func(c *api.Config) {
		c.Auth = g
		c.Keyer = keyer
	})
	// HEAD counts no lookup in the statistics: nothing to admit for.
	get := func(tok authtest.Token, ns string) *http.Response {
		return srv.Do(http.MethodGet, srv.EntryURL(ns, keyOf(ns)), nil, bearer(tok)...)
	}
	post := func(path, body string) func(tok authtest.Token, ns string) *http.Response {
		return func(tok authtest.Token, ns string) *http.Response {
			h := append([]string{"Content-Type", "application/json"}, bearer(tok)...)
			return srv.Do(http.MethodPost, srv.URL+"/v1/"+ns+path, strings.NewReader(body), h...)
		}
	}
	sig, _ := json.Marshal(map[string]string{"backend": "passthrough", "kind": "jax", "key": "jit_f-" + strings.Repeat("1", 64)})
	batch := `{"keys": ["` + keyOf("b1") + `", "` + keyOf("b2") + `"]}`
	// In order: each admitted namespace takes one of the five slots.
	tests := []struct {
		name   string
		tok    authtest.Token
		ns     string
		lookup func(tok authtest.Token, ns string) *http.Response
		misses int64
		row    bool // counted under ns, not _other
	}{
		{"writer GET", sweeper, "sweep-get", get, 1, true},
		{"writer batch", sweeper, "sweep-batch", post("/batch", batch), 2, true},
		{"writer lookup", sweeper, "sweep-lookup", post("/lookup", string(sig)), 1, true},
		{"reader GET", tokReader, "made-up", get, 1, false},
		{"reader batch", tokReader, "made-up-2", post("/batch", batch), 2, false},
		{"anonymous GET", authtest.Token{}, "public", get, 1, false},
		{"writer at the cap", sweeper, "sweep-last", get, 1, true},
		{"writer beyond the cap", sweeper, "sweep-over", get, 1, false},
	}
	var other int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.lookup(tt.tok, tt.ns)
			if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusOK {
				t.Fatalf("lookup: %d %s", resp.StatusCode, bytes.TrimSpace(body))
			}
			if !tt.row {
				other += tt.misses
			}
			got := missesByNamespace(t, srv.Server, tokAdmin)
			if tt.row && got[tt.ns] != tt.misses {
				t.Errorf("%s: %d misses, want %d (by namespace: %v)", tt.ns, got[tt.ns], tt.misses, got)
			}
			if n, ok := got[tt.ns]; !tt.row && ok {
				t.Errorf("%s has a row (%d misses): a lookup that may not admit it did (by namespace: %v)", tt.ns, n, got)
			}
			if got[stats.Other] != other {
				t.Errorf("%s: %d misses, want %d (by namespace: %v)", stats.Other, got[stats.Other], other, got)
			}
		})
	}
}

// TestOpenServerLookupsAdmitTheirNamespace: a server without --tokens lets
// every caller write, so every lookup admits its namespace, as a PUT would.
func TestOpenServerLookupsAdmitTheirNamespace(t *testing.T) {
	srv := statstest.StartWith(t, nil, nil)
	for range 3 {
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("fresh", keyOf("not yet")), nil))
	}
	got := missesByNamespace(t, srv.Server, authtest.Token{})
	if got["fresh"] != 3 || got[stats.Other] != 0 {
		t.Fatalf("misses by namespace %v, want fresh: 3 and none under %s", got, stats.Other)
	}
}
