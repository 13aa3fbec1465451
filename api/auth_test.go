package api

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/store"
)

func TestAccessFor(t *testing.T) {
	const (
		get, head, put, post, del = http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete
	)
	key := "/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pub := access{public: true}
	tests := []struct {
		method, path string
		want         access
	}{
		{get, "/healthz", pub},
		{get, "/readyz", pub},
		{get, "/", pub},
		{get, "/app.js", pub},
		{post, "/", access{ns: "*", need: auth.ScopeAdmin}},
		{get, "/metrics", access{ns: "*", need: auth.ScopeRead}},
		{get, "/v1/stats", access{ns: "*", need: auth.ScopeAdmin}},
		{get, "/v1/plugins", access{ns: "*", need: auth.ScopeRead}},
		{post, "/v1/plugins", access{ns: "*", need: auth.ScopeAdmin}},
		// Namespaces spelled like global resources are namespaces.
		{get, "/v1/plugins/entries" + key, access{ns: "plugins", need: auth.ScopeRead}},
		{get, "/v1/stats/entries" + key, access{ns: "stats", need: auth.ScopeRead}},
		{get, "/v1/stats/stats", access{ns: "stats", need: auth.ScopeRead}},
		{put, "/v1/stats/entries" + key, access{ns: "stats", need: auth.ScopeWrite}},
		{get, "/v1/default/entries" + key, access{ns: "default", need: auth.ScopeRead}},
		{head, "/v1/default/entries" + key, access{ns: "default", need: auth.ScopeRead}},
		{put, "/v1/default/entries" + key, access{ns: "default", need: auth.ScopeWrite}},
		{del, "/v1/default/entries" + key, access{ns: "default", need: auth.ScopeAdmin}},
		{post, "/v1/team-a/keys", access{ns: "team-a", need: auth.ScopeRead}},
		{post, "/v1/team-a/lookup", access{ns: "team-a", need: auth.ScopeRead}},
		{post, "/v1/team-a/batch", access{ns: "team-a", need: auth.ScopeRead}},
		{post, "/v1/team-a/exists", access{ns: "team-a", need: auth.ScopeRead}},
		{post, "/v1/team-a/leases" + key, access{ns: "team-a", need: auth.ScopeWrite}},
		{del, "/v1/team-a/leases" + key, access{ns: "team-a", need: auth.ScopeWrite}},
		{get, "/v1/team-a/runs/r1/manifest", access{ns: "team-a", need: auth.ScopeRead}},
		{get, "/v1/team-a/stats", access{ns: "team-a", need: auth.ScopeRead}},
		{get, "/v1/team-a/misses", access{ns: "team-a", need: auth.ScopeRead}},
		// Unknown writes fail closed.
		{post, "/v1/team-a/something-new", access{ns: "team-a", need: auth.ScopeAdmin}},
		{put, "/v1/team-a/entries", access{ns: "team-a", need: auth.ScopeWrite}},
		{post, "/v1/Bad_NS!/x", access{ns: "*", need: auth.ScopeAdmin}},
		{get, "/v1/Bad_NS!/x", access{ns: "*", need: auth.ScopeRead}},
		{get, "/v1/", access{ns: "*", need: auth.ScopeRead}},
		// Spellings the router accepts get the same rule.
		{get, "/V1/Default/ENTRIES" + key, access{ns: "default", need: auth.ScopeRead}},
		{put, "/v1/default/entries" + key + "//", access{ns: "default", need: auth.ScopeWrite}},
		{del, "/V1/default/Entries" + key + "/", access{ns: "default", need: auth.ScopeAdmin}},
		{get, "/METRICS/", access{ns: "*", need: auth.ScopeRead}},
		{get, "/V1/STATS", access{ns: "*", need: auth.ScopeAdmin}},
	}
	for _, tc := range tests {
		if got := accessFor(tc.method, tc.path); got != tc.want {
			t.Errorf("accessFor(%s %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestEveryRouteIsGuarded walks the routes actually registered: every /v1
// route needs at least read, and every /v1 route that changes state needs
// at least write, so a route added later cannot slip out unguarded.
func TestEveryRouteIsGuarded(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer(":ns", "team-a", ":key", strings.Repeat("ab", 32), ":run", "r1", "*", "x")
	readOnly := map[string]bool{"keys": true, "lookup": true, "batch": true, "exists": true}
	n := 0
	for _, r := range s.App().GetRoutes(true) {
		if r.Method == "USE" || !strings.HasPrefix(r.Path, "/v1") {
			continue
		}
		n++
		path := fill.Replace(r.Path)
		acc := accessFor(r.Method, path)
		if acc.public || acc.need < auth.ScopeRead {
			t.Errorf("%s %s is not guarded: %+v", r.Method, r.Path, acc)
		}
		seg := strings.Split(path, "/")
		changes := r.Method != http.MethodGet && r.Method != http.MethodHead && !(len(seg) > 3 && readOnly[seg[3]])
		if changes && acc.need < auth.ScopeWrite {
			t.Errorf("%s %s changes state but needs only %s", r.Method, r.Path, acc.need)
		}
	}
	if n < 10 {
		t.Fatalf("only %d /v1 routes found", n)
	}
}
