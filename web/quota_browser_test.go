package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store"
)

// TestDashboardShowsNamespaceQuotas gives team-a of a real server a quota
// and checks the quotas card: team-a's usage against it, team-b with none.
func TestDashboardShowsNamespaceQuotas(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	statstest.Seed(t, srv.URL) // five entries of 1,000 bytes in each namespace
	if err := srv.Store.SetQuotas(store.Quotas{Namespaces: map[string]store.Quota{
		"team-a": {MaxBytes: 10000, MaxEntries: 8, MaxIdle: 168 * time.Hour},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText(`#quota-table tr[data-ns="team-a"]`, "62.5%"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		function row(s){var e=document.querySelector(s);return e?Array.prototype.map.call(e.cells,function(c){return c.textContent.trim();}).join("|"):null;}
		return {a: row('#quota-table tr[data-ns="team-a"]'), b: row('#quota-table tr[data-ns="team-b"]'),
			hidden: String(document.getElementById("quota-card").hidden)};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"a":      "team-a|5 / 8|4.9 KiB / 9.8 KiB|62.5%|idle 7.0 days|0|0",
		"b":      "team-b|5|4.9 KiB|no quota|never|0|0",
		"hidden": "false",
	} {
		if g := got[k]; !strings.Contains(g, want) {
			t.Errorf("%s = %q, want it to contain %q", k, g, want)
		}
	}
	screenshot(t, ctx, "dashboard-quotas.png", 1366, 768)
	checkLayout(t, ctx, "dashboard-quotas-800.png", 800, 900)
}

// TestDashboardEvictionsSurviveARestart: the Evictions card reads the
// persisted count (the whole server's, or the namespace's in its view),
// not the store's own, which starts again at 0 with every restart while
// the evictions chart keeps its history.
func TestDashboardEvictionsSurviveARestart(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	statstest.Seed(t, srv.URL)
	// What serve's eviction hook records for each entry the store evicts.
	srv.Stats().RecordEvictions("team-a", "xla", store.ReasonQuota, 3)
	srv.Stats().RecordEvictions("team-b", "xla", store.ReasonIdle, 2)
	srv.Restart()
	for _, tc := range []struct{ path, want string }{{"/", "5"}, {"/?ns=team-a", "3"}} {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(srv.URL+tc.path),
			waitText("#kpi-hit-rate-sub", "lookups hit"),
		); err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("kpi-evictions").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: Evictions card reads %q after a restart, want %q", tc.path, got, tc.want)
		}
	}
	// The namespace's split, persisted with its reasons, survives too.
	sub, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("kpi-evictions-sub").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 evicted · 0 expired (idle or age limit)"; sub != want {
		t.Errorf("team-a's Evictions card says %q after a restart, want %q", sub, want)
	}
}
