package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardSweepCountsLeaseWaitsAsNoCompile: two arms of a sweep miss
// the same key; one compiles and uploads it, the other gets it from GET
// ?wait= (as a client does after finding the compile lease held). The
// sweep view says the first ran one compile and the second none, though
// each missed once, and the hit-rate card names the wait.
func TestDashboardSweepCountsLeaseWaitsAsNoCompile(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	call := caller(t, srv.URL)
	path := "/v1/default/entries/" + statstest.Key(0, 0)
	for _, arm := range []string{"waits:holder", "waits:waiter"} {
		call(http.MethodGet, path, nil, http.StatusNotFound, "X-Cachesvc-Run", arm)
	}
	call(http.MethodPut, path, []byte("executable"), http.StatusCreated, "X-Cachesvc-Run", "waits:holder", "X-Cachesvc-Backend", "xla")
	call(http.MethodGet, path+"?wait=5s", nil, http.StatusOK, "X-Cachesvc-Run", "waits:waiter")

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?sweep=waits"),
		waitText("#sweep-summary", "2 arms"),
	); err != nil {
		t.Fatalf("sweep view: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		var t = document.getElementById("sweep-table"), o = {card: document.getElementById("kpi-hit-rate-sub").textContent,
			head: Array.prototype.map.call(t.tHead.rows[0].cells, function(c){return c.textContent;}).join("|")};
		Array.prototype.forEach.call(t.tBodies[0].rows, function(r){ o[r.cells[0].textContent] = Array.prototype.slice.call(r.cells, 1).map(function(c){return c.textContent;}).join("|"); });
		return o;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got["head"] != "Arm|holder|waiter" {
		t.Fatalf("sweep columns = %q", got["head"])
	}
	for row, want := range map[string]string{
		"Lookups":                             "1|2",
		"Compiles avoided (hits)":             "0|1",
		"Compiles run (misses − lease waits)": "1|0",
	} {
		if got[row] != want {
			t.Errorf("sweep row %q = %q, want %q", row, got[row], want)
		}
	}
	if !strings.Contains(got["card"], "1 after waiting on a compile lease") {
		t.Errorf("hit-rate card = %q, want it to name the lease wait", got["card"])
	}
}
