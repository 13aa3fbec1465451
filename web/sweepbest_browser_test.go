package web_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardSweepMarksBestOnlyWhenItBeatsAnArm: arms a and b of a sweep
// hit both their lookups, arm c one of two. Where a and b beat c, both are
// marked best; where every arm shows the same figure (no compile time
// saved anywhere, first hits all within the first second), none is: a
// mark on every arm says nothing.
func TestDashboardSweepMarksBestOnlyWhenItBeatsAnArm(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	call := caller(t, srv.URL)
	stored := "/v1/default/entries/" + statstest.Key(0, 0)
	call(http.MethodPut, stored, []byte("executable"), http.StatusCreated, "X-Cachesvc-Backend", "xla")
	for _, arm := range []string{"ties:a", "ties:b", "ties:c"} {
		call(http.MethodGet, stored, nil, http.StatusOK, "X-Cachesvc-Run", arm, "X-Cachesvc-Backend", "xla")
		if arm == "ties:c" {
			call(http.MethodGet, "/v1/default/entries/"+statstest.Key(1, 0), nil, http.StatusNotFound, "X-Cachesvc-Run", arm, "X-Cachesvc-Backend", "xla")
		} else {
			call(http.MethodGet, stored, nil, http.StatusOK, "X-Cachesvc-Run", arm, "X-Cachesvc-Backend", "xla")
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?sweep=ties"),
		waitText("#sweep-summary", "3 arms"),
	); err != nil {
		t.Fatalf("sweep view: %v", err)
	}
	// Each row as its cells' texts, a best one followed by "*".
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		var o = {};
		Array.prototype.forEach.call(document.getElementById("sweep-table").tBodies[0].rows, function(r){
			o[r.cells[0].textContent] = Array.prototype.slice.call(r.cells, 1).map(function(c){
				return c.textContent + (c.classList.contains("best") ? "*" : "");
			}).join("|");
		});
		return o;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ row, want string }{
		{"Lookups", "2|2|2"},                               // no better end
		{"Compiles avoided (hits)", "2*|2*|1"},             // a and b tie, beating c
		{"Compiles run (misses − lease waits)", "0*|0*|1"}, // likewise, the fewer the better
		{"Hit rate", "100.0%*|100.0%*|50.0%"},              // likewise
		{"Compile time saved", "0 s|0 s|0 s"},              // all tie: none marked
		{"Time to first hit", "0 s|0 s|0 s"},               // all show the same
	} {
		if got[tt.row] != tt.want {
			t.Errorf("sweep row %q = %q, want %q (* marks best)", tt.row, got[tt.row], tt.want)
		}
	}
}
