package web_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardCardsSayWhatTheyShow: the cards of a server with one upload,
// one hit and one raw GET miss, and no eviction, read as sentences: "in 1
// write", not "1 writes"; the raw GET misses' dagger stays on their line
// when the card wraps; the evictions chart, an empty plot, says there were
// none rather than nothing.
func TestDashboardCardsSayWhatTheyShow(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	call := caller(t, srv.URL)
	path := "/v1/default/entries/" + statstest.Key(0, 0)
	call(http.MethodPut, path, []byte("executable"), http.StatusCreated, "X-Cachesvc-Backend", "xla")
	call(http.MethodGet, path, nil, http.StatusOK, "X-Cachesvc-Backend", "xla")
	call(http.MethodGet, "/v1/default/entries/"+statstest.Key(1, 0), nil, http.StatusNotFound)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", "2"),
		chromedp.Poll[chromedp.Void](`!!window.cachesvcDashboard.charts["chart-evictions"]`),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		function txt(s){var e=document.querySelector(s);return e?e.textContent.replace(/\s+/g, " ").trim():"(none)";}
		return {bytes: txt("#kpi-bytes-out ~ .kpi-sub"), hitRate: document.getElementById("kpi-hit-rate-sub").textContent,
			evictions: txt("figure:has(#chart-evictions) figcaption")};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ card, want string }{
		{"bytes", "10 B uploaded in 1 write"},
		{"hitRate", "1 of 2 lookups hit · 1 raw GET miss\u00a0†"},
		{"evictions", "Evictions and integrity failures (none in this range)"},
	} {
		if got[tt.card] != tt.want {
			t.Errorf("%s card = %q, want %q", tt.card, got[tt.card], tt.want)
		}
	}
}
