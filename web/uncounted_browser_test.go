package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
)

// TestDashboardSharedTierUncounted serves the dashboard of a fleet replica
// (real server, tiered store over a real versitygw bucket) before its first
// listing of the bucket: the store card says the shared tier is not counted
// yet, and why, where it said "shared tier 0 B in 0 entries" as if the
// bucket were empty, and the page does not claim an empty cache; once the
// bucket is listed the card shows its count and the listing's age. The
// words are those of `cachesvc stats` (stats/report/listed_test.go): the
// card said "shared tier not counted yet (...)" and "as this replica
// listed it ..." where the CLI said "not yet listed by this replica" and
// "the fleet's as ... plus its own writes since", and its title gave the
// interval as 10 minutes whatever it was.
func TestDashboardSharedTierUncounted(t *testing.T) {
	ctx := browser(t)
	srv3 := s3test.Start(t)
	srv, shared := statstest.StartReplica(t, srv3, 0)
	card := func() map[string]string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({
			sub: document.getElementById("kpi-store-sub").textContent,
			title: document.getElementById("kpi-store-sub").title,
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
		{"before the first listing", before, "sub", "shared tier: not yet listed by this replica, not counted yet (first listing of the bucket pending)", "shared tier 0 B"},
		// The bucket may hold the other replicas' entries.
		{"before the first listing", before, "empty", "hidden", ""},
		{"after a listing", after, "sub", "shared tier 0 B in 0 entries (no limit), the fleet's as this replica listed it just now, plus its own writes since", "not counted"},
		// This replica lists the bucket only when the test says (no
		// interval): the title does not make one up.
		{"after a listing", after, "title", "plus its own writes since. Other replicas'", "every"},
	}
	for _, tt := range tests {
		if g := tt.got[tt.field]; !strings.Contains(g, tt.want) || tt.not != "" && strings.Contains(g, tt.not) {
			t.Errorf("%s: %s = %q, want it to contain %q and not %q", tt.name, tt.field, g, tt.want, tt.not)
		}
	}
}

// TestDashboardSharedTierListInterval: a replica that lists the bucket on
// its own says how often in the store card's title, from the stats'
// store.list_interval_s, where the title said "every 10 minutes" whatever
// the interval was.
func TestDashboardSharedTierListInterval(t *testing.T) {
	ctx := browser(t)
	srv, shared := statstest.StartReplicaWith(t, s3test.Start(t), tieredtest.Options{UsageInterval: time.Hour})
	for deadline := time.Now().Add(time.Minute); shared.Usage().ListedAt.IsZero(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the bucket was not listed at open")
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-store-label", "Hot tier (this replica)"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("kpi-store-sub").title`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "plus its own writes since (it lists the bucket every hour)."; !strings.Contains(title, want) {
		t.Errorf("store card title %q, want it to contain %q", title, want)
	}
}
