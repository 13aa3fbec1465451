package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestStatsSharedTierUncounted: a fleet replica knows its shared tier's
// size only once it has listed the bucket (at start, then every 10
// minutes; the listing fails or hangs while the bucket is unreachable).
// Before, the replica reported 0 bytes in 0 entries until then: GET
// /v1/stats as an empty bucket, the store series as a drop to 0 and
// cachesvc_store_bytes as 0. Now /v1/stats says store.uncounted with the
// reason (pending, or the failing listing's error), the step's size is
// null while the step is still sampled, and the size gauges are absent
// beside cachesvc_store_listed_timestamp_seconds 0; a listing makes them
// counts, with listed_at.
func TestStatsSharedTierUncounted(t *testing.T) {
	srv3 := s3test.Start(t)
	srv, shared := statstest.StartReplica(t, srv3, 0)
	type view struct {
		uncounted, listedAt string
		size                any // the last step's store_bytes
		sampled             bool
		metrics             string
	}
	read := func() view {
		t.Helper()
		var r struct {
			Store struct {
				Uncounted string `json:"uncounted"`
				ListedAt  string `json:"listed_at"`
			} `json:"store"`
			Series struct {
				StoreBytes []any  `json:"store_bytes"`
				Sampled    []bool `json:"sampled"`
			} `json:"series"`
		}
		if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/stats?since=10m")), &r); err != nil {
			t.Fatal(err)
		}
		n := len(r.Series.StoreBytes)
		if n == 0 || len(r.Series.Sampled) != n {
			t.Fatalf("series: %d sizes, %d sampled flags", n, len(r.Series.Sampled))
		}
		return view{r.Store.Uncounted, r.Store.ListedAt, r.Series.StoreBytes[n-1], r.Series.Sampled[n-1], get(t, srv.URL+"/metrics")}
	}
	check := func(when string, v view, uncounted string, counted bool) {
		t.Helper()
		if !strings.Contains(v.uncounted, uncounted) || (uncounted == "") != (v.uncounted == "") {
			t.Errorf("%s: store.uncounted = %q, want %q", when, v.uncounted, uncounted)
		}
		if (v.listedAt != "") != counted {
			t.Errorf("%s: store.listed_at = %q, want it given: %v", when, v.listedAt, counted)
		}
		if (v.size != nil) != counted || !v.sampled {
			t.Errorf("%s: the step's store_bytes = %v, sampled %v; want a size: %v, sampled", when, v.size, v.sampled, counted)
		}
		for _, m := range []string{"cachesvc_store_bytes", "cachesvc_store_entries", "cachesvc_store_blobs"} {
			if strings.Contains(v.metrics, "\n"+m+" ") != counted {
				t.Errorf("%s: /metrics has %s: %v, want %v", when, m, !counted, counted)
			}
		}
		if zero := strings.Contains(v.metrics, "\ncachesvc_store_listed_timestamp_seconds 0\n"); zero == counted || !strings.Contains(v.metrics, "\ncachesvc_store_listed_timestamp_seconds ") {
			t.Errorf("%s: /metrics lacks cachesvc_store_listed_timestamp_seconds, or it is 0: %v (want 0: %v)", when, zero, !counted)
		}
	}
	check("before the first listing", read(), "first listing of the bucket pending", false)

	// The bucket hangs: the listing gives up (here at the caller's
	// deadline) and its error is the reason.
	srv3.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := shared.ScanUsage(ctx)
	cancel()
	srv3.Resume(t)
	if err == nil {
		t.Fatal("a listing of a paused bucket succeeded")
	}
	check("after a failed listing", read(), "first listing of the bucket failing: list entries s3://", false)

	if err := shared.ScanUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after a listing", read(), "", true)
}

// get returns url's body, failing the test unless it answers 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
