package api

import (
	"net/http"
	"testing"

	"github.com/cachesvc/cachesvc/api/auth"
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
