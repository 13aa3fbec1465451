package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestStatsStoreNamespacesBounded: with more namespaces than GET /v1/stats
// names, store.namespaces lists 256 of them and one "_other" row summing
// the rest, so the answer (and the dashboard's quotas card) stays bounded;
// /v1/{ns}/stats still answers any one of them. Before, it listed all
// 20,000 namespaces of a lab's store: 2.2 MB every 3 s per dashboard.
func TestStatsStoreNamespacesBounded(t *testing.T) {
	srv := startWithStats(t)
	const n = 300
	for i := range n {
		ns := fmt.Sprintf("team-%03d", i)
		body := strings.Repeat("x", i+1) // team-299 holds the most bytes
		resp := srv.Do("PUT", srv.EntryURL(ns, entryKey(ns)), strings.NewReader(body))
		apitest.ReadAll(t, resp)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s: %d", ns, resp.StatusCode)
		}
	}
	r := getStats(t, srv.URL+"/v1/stats")
	us := r.Store.Namespaces
	if len(us) != 257 || us[len(us)-1].Namespace != "_other" {
		t.Fatalf("store.namespaces has %d rows (last %q), want 256 and _other", len(us), us[len(us)-1].Namespace)
	}
	var entries, bytes int64
	named := map[string]bool{}
	for _, u := range us {
		entries += u.Entries
		bytes += u.Bytes
		named[u.Namespace] = true
	}
	if entries != n || bytes != n*(n+1)/2 {
		t.Errorf("rows sum to %d entries and %d bytes, want %d and %d", entries, bytes, n, n*(n+1)/2)
	}
	// Named: the namespaces the statistics track (the first 64 written,
	// whose table rows show their usage), then the largest.
	if !named["team-000"] || !named["team-299"] || named["team-100"] {
		t.Errorf("named: team-000 (tracked) %v, team-299 (largest) %v, team-100 (neither) %v",
			named["team-000"], named["team-299"], named["team-100"])
	}
	one := getStats(t, srv.URL+"/v1/team-000/stats")
	if len(one.Store.Namespaces) != 1 || one.Store.Namespaces[0].Entries != 1 {
		t.Errorf("/v1/team-000/stats: %+v", one.Store.Namespaces)
	}
}
