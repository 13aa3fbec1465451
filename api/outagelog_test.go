package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestSharedTierOutageLogsOneLinePerInterval stops the S3 server (versitygw)
// under a replica serving on a real listener, and sends cold reads that
// each fail 503 shared_tier_unavailable. The log must carry one WARN
// request line for them per interval, the rest at INFO (as answered
// requests are) with every request id still findable, and the next WARN line must count the lines
// demoted since. Before, every failing request wrote its own WARN line:
// an outage under load flooded the log.
func TestSharedTierOutageLogsOneLinePerInterval(t *testing.T) {
	s3srv := s3test.Start(t)
	var logs syncBuffer
	var ts *tiered.Store
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		API: func(c *api.Config) {
			ts, _ = tieredtest.Open(t, s3srv, tieredtest.Options{Hot: c.Store.(*store.Badger), MaxRetries: 1, ProbeInterval: 20 * time.Millisecond})
			c.Store = ts
			c.SharedTier = func() wire.SharedTierState {
				return wire.SharedTierState{Configured: true, Reachable: ts.SharedState().Reachable}
			}
		},
	})
	srv.API.SetOutageLogEvery(time.Hour)

	s3srv.Stop()
	for deadline := time.Now().Add(10 * time.Second); ts.SharedState().Reachable; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shared tier still looks reachable 10 s after S3 stopped")
		}
	}
	get := func(i int) string {
		t.Helper()
		resp := srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("cold"+string(rune('a'+i)))), nil)
		body := apitest.ReadAll(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shared_tier_unavailable") {
			t.Fatalf("cold GET during the outage: %d %s, want 503 shared_tier_unavailable", resp.StatusCode, body)
		}
		return resp.Header.Get("X-Request-Id")
	}
	const n = 12
	var ids []string
	for i := range n {
		ids = append(ids, get(i))
	}
	srv.API.SetOutageLogEvery(0) // the next line is due: it counts the demoted ones
	last := get(n)

	type line struct {
		Level, Msg, Code string
		RequestID        string `json:"request_id"`
		Similar          int    `json:"similar_since_last_log"`
	}
	byID := map[string]line{}
	var warns []line
	for _, s := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil || l.Msg != "request" || l.Code != "shared_tier_unavailable" {
			continue
		}
		byID[l.RequestID] = l
		if l.Level != "INFO" {
			warns = append(warns, l)
		}
	}
	if len(warns) != 2 || warns[0].RequestID != ids[0] || warns[1].RequestID != last {
		t.Errorf("%d request lines above INFO for %d failing requests, want 2: the first and the one after the interval: %+v", len(warns), n+1, warns)
	}
	if len(warns) == 2 && (warns[0].Level != "WARN" || warns[1].Similar != n-1) {
		t.Errorf("the lines above INFO: %+v, want WARN, the second with similar_since_last_log %d", warns, n-1)
	}
	for _, id := range append(ids, last) {
		if _, ok := byID[id]; !ok {
			t.Errorf("request %s is in no log line", id)
		}
	}
}
