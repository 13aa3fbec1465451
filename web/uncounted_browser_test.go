package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestDashboardSharedTierUncounted serves the dashboard of a fleet replica
// (real server, tiered store over a real versitygw bucket) before its first
// listing of the bucket: the store card says the shared tier is not counted
// yet, and why, where it said "shared tier 0 B in 0 entries" as if the
// bucket were empty, and the page does not claim an empty cache; once the
// bucket is listed the card shows its count.
func TestDashboardSharedTierUncounted(t *testing.T) {
	ctx := browser(t)
	srv3 := s3test.Start(t)
	srv, shared := statstest.StartReplica(t, srv3, 0)
	card := func() map[string]string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({
			sub: document.getElementById("kpi-store-sub").textContent,
			empty: document.getElementById("empty-state").hidden ? "hidden" : "shown"})`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-store-label", "Hot tier (this replica)"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	before := card()
	screenshot(t, ctx, "dashboard-shared-tier-uncounted.png", 1366, 900)

	if err := shared.ScanUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-store-label", "Hot tier (this replica)"),
	); err != nil {
		t.Fatalf("reload dashboard: %v", err)
	}
	after := card()
	tests := []struct {
		name      string
		got       map[string]string
		field     string
		want, not string
	}{
		{"before the first listing", before, "sub", "shared tier not counted yet (first listing of the bucket pending)", "shared tier 0 B"},
		// The bucket may hold the other replicas' entries.
		{"before the first listing", before, "empty", "hidden", ""},
		{"after a listing", after, "sub", "shared tier 0 B in 0 entries (no limit)", "not counted"},
	}
	for _, tt := range tests {
		if g := tt.got[tt.field]; !strings.Contains(g, tt.want) || tt.not != "" && strings.Contains(g, tt.not) {
			t.Errorf("%s: %s = %q, want it to contain %q and not %q", tt.name, tt.field, g, tt.want, tt.not)
		}
	}
}
