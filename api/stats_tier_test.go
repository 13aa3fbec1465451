package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestStatsStoreTiers: a stats answer says whose store usage it carries:
// a server's own store (local), a fleet replica's shared tier with its hot
// tier beside it, and a namespace's share of the replica's hot tier (where
// quotas apply).
func TestStatsStoreTiers(t *testing.T) {
	replica, _ := replicaAPI(t, s3test.Start(t), 0)
	get := func(path string) wire.StatsResponse {
		resp, err := replica.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r wire.StatsResponse
		if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return r
	}
	local := apitest.Start(t, apitest.Options{})
	tests := []struct {
		name    string
		r       wire.StatsResponse
		tier    string
		wantHot bool
	}{
		{"server on its own", getStats(t, local.URL+"/v1/stats"), wire.StoreTierLocal, false},
		{"fleet replica", get("/v1/stats"), wire.StoreTierShared, true},
		{"fleet replica, one namespace", get("/v1/default/stats"), wire.StoreTierHot, false},
	}
	resp, err := replica.App().Test(httptest.NewRequest("GET", "/metrics", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"\ncachesvc_store_max_bytes 0\n", "\ncachesvc_hot_tier_max_bytes 0\n", "\ncachesvc_hot_tier_bytes ", "\ncachesvc_hot_tier_entries "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("fleet replica's /metrics lacks %q", strings.TrimSpace(want))
		}
	}
	for _, tt := range tests {
		st := tt.r.Store
		if st.Tier != tt.tier || (st.Hot != nil) != tt.wantHot {
			t.Errorf("%s: store tier %q, hot tier %+v; want tier %q, hot tier given=%v", tt.name, st.Tier, st.Hot, tt.tier, tt.wantHot)
		}
		if st.Hot != nil && (st.Hot.Tier != wire.StoreTierHot || st.MaxBytes != 0) {
			t.Errorf("%s: hot tier %q, shared tier limit %d; want hot and no limit", tt.name, st.Hot.Tier, st.MaxBytes)
		}
	}
}

// TestStatsFleetStoreShape: on a fleet replica, the outer figures of
// GET /v1/stats's store are the shared tier's (the fleet's bucket), and
// what belongs to this replica's hot tier alone (its disk use, its
// evictions, its namespaces' usage against their quotas) is under
// store.hot. Format 3 sent the hot tier's disk bytes, evictions and
// namespaces as the outer ones, beside the shared tier's entries and
// bytes, so a reader of the top level took one replica's for the fleet's.
func TestStatsFleetStoreShape(t *testing.T) {
	srv3 := s3test.Start(t)
	const size = 1 << 20
	ts, _ := tieredtest.Open(t, srv3, tieredtest.Options{HotMaxBytes: 3 * size})
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) {
		c.Store = ts
		c.SharedTier = func() wire.SharedTierState { return wire.SharedTierState{Configured: true, Reachable: true} }
	}})
	for i := range 5 { // 5 MiB into a 3 MiB hot tier: 2 evictions
		key := fmt.Sprintf("%x", sha256.Sum256([]byte{byte(i)}))
		resp := srv.Do(http.MethodPut, srv.EntryURL("default", key), bytes.NewReader(bytes.Repeat([]byte{byte(i)}, size)))
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT entry %d: %d", i, resp.StatusCode)
		}
	}
	r := getStats(t, srv.URL+"/v1/stats")
	st := r.Store
	if st.Hot == nil {
		t.Fatalf("store %+v has no hot tier", st)
	}
	h := st.Hot
	tests := []struct {
		name      string
		got, want int64
	}{
		{"format", int64(r.Format), 4},
		{"shared tier entries", st.Entries, 5},
		{"shared tier disk bytes (it has no disk of this replica's)", st.DiskBytes, 0},
		{"shared tier evictions (it evicts nothing)", st.Evictions, 0},
		{"shared tier namespaces (quotas bound hot tiers)", int64(len(st.Namespaces)), 0},
		{"hot tier entries", h.Entries, 3},
		{"hot tier evictions", h.Evictions, 2},
		{"hot tier namespaces", int64(len(h.Namespaces)), 1},
		{"hot tier has disk bytes", min(h.DiskBytes, 1), 1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if len(h.Namespaces) == 1 && (h.Namespaces[0].Namespace != "default" || h.Namespaces[0].Entries != 3 || h.Namespaces[0].Evictions != 2) {
		t.Errorf("hot tier's namespace usage %+v, want default: 3 entries, 2 evictions", h.Namespaces[0])
	}

	// The metrics: the hot tier's figures are all in the cachesvc_hot_tier_
	// family beside the shared tier's cachesvc_store_ sizes (before, its
	// disk use, evictions and quarantined entries were only under the
	// generic names, which stay, with the same values, for the dashboards
	// and alerts that read them).
	scraped := map[string]float64{}
	for _, line := range strings.Split(string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil))), "\n") {
		var v float64
		if name, val, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			if _, err := fmt.Sscan(val, &v); err == nil {
				scraped[name] = v
			}
		}
	}
	disk := scraped["cachesvc_store_disk_bytes"]
	metrics := []struct {
		series string
		want   float64
	}{
		{"cachesvc_hot_tier_entries", 3},
		{"cachesvc_hot_tier_evictions_total", 2},
		{"cachesvc_hot_tier_disk_bytes", disk},
		{"cachesvc_hot_tier_quarantined_entries", 0},
		{"cachesvc_evictions_total", 2},
		{"cachesvc_quarantined_entries", 0},
	}
	for _, m := range metrics {
		if got, ok := scraped[m.series]; !ok || got != m.want {
			t.Errorf("%s = %v (exported: %v), want %v", m.series, got, ok, m.want)
		}
	}
	if disk <= 0 {
		t.Errorf("cachesvc_store_disk_bytes = %v, want the hot tier's files' size", disk)
	}
}
