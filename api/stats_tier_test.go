package api_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
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
