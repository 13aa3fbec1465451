package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestDashboardStoreTiers serves the dashboard of a fleet replica on a real
// tiered store (Badger hot tier with a 3 MiB --max-size over a bucket of a
// real S3 server, versitygw) whose bucket holds 5 MiB: the store card shows
// the replica's hot tier against its own limit and names the shared tier
// beside it without a limit. It used to show the bucket's 5 MiB as
// "5.0 MiB / 3.0 MiB", 100% of the hot tier's limit.
func TestDashboardStoreTiers(t *testing.T) {
	ctx := browser(t)
	srv3 := s3test.Start(t)
	const size = 1 << 20
	ts, shared := tieredtest.Open(t, srv3, tieredtest.Options{HotMaxBytes: 3 * size})
	// The first listing, as a replica's start does: until one, the card
	// says the shared tier is not counted yet.
	if err := shared.ScanUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := statstest.StartWith(t, nil, func(c *api.Config) {
		c.Store = ts
		c.SharedTier = func() wire.SharedTierState { return wire.SharedTierState{Configured: true, Reachable: true} }
	})
	for i := range 5 {
		key := fmt.Sprintf("%x", sha256.Sum256([]byte{byte(i)}))
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/default/entries/"+key, bytes.NewReader(bytes.Repeat([]byte{byte(i)}, size)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT entry %d: %d", i, resp.StatusCode)
		}
	}
	listedAt := shared.Usage().ListedAt.Format(time.RFC3339Nano) // as the stats answer encodes it
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-store-label", "Hot tier (this replica)"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({
		value: document.getElementById("kpi-store").textContent,
		sub: document.getElementById("kpi-store-sub").textContent,
		subTitle: document.getElementById("kpi-store-sub").title,
		chart: document.getElementById("store-chart-title").textContent,
		quota: document.getElementById("quota-card").hidden ? "hidden" : document.getElementById("quota-table").tBodies[0].textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ field, want string }{
		{"value", "3.0 MiB / 3.0 MiB"},
		{"sub", "3 entries · 100% of limit"},
		{"sub", "shared tier 5.0 MiB in 5 entries (no limit)"},
		// The shared tier's count is this replica's last listing plus
		// its own writes: the card says how old it is, where it gave
		// the count unlabelled, as if current for the whole fleet.
		{"sub", "(no limit), the fleet's as this replica listed it "},
		{"subTitle", "at its last listing of the bucket (" + listedAt + "), plus its own writes since"},
		// The chart beside the card draws the shared tier's 5 MiB: its
		// title says so, not "Store size" under a card of 3 MiB.
		{"chart", "Shared tier size (the whole fleet's entries; no limit)"},
		// Stats format 4 moved the hot tier's disk use and namespaces
		// under store.hot: the card still names its disk use, and the
		// quotas card still lists the hot tier's namespaces.
		{"sub", " on disk"},
		{"quota", "default"},
	}
	for _, tt := range tests {
		if !strings.Contains(got[tt.field], tt.want) {
			t.Errorf("store card %s = %q, want it to contain %q", tt.field, got[tt.field], tt.want)
		}
	}
	screenshot(t, ctx, "dashboard-store-tiers.png", 1366, 900)
	checkLayout(t, ctx, "dashboard-store-tiers-800.png", 800, 900)
}
