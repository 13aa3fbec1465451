package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardDrawsDowntimeAsGap: a server takes traffic for ten minutes
// forty minutes ago, is down for about half an hour, and comes back. For a
// step in which it was down the charts hold no sample (null: a gap in the
// store line, no bars), not a store size carried through or counts of 0,
// and the page says what the shaded steps are.
func TestDashboardDrawsDowntimeAsGap(t *testing.T) {
	ctx := browser(t)
	var offset atomic.Int64
	offset.Store(int64(-40 * time.Minute))
	srv := statstest.Start(t, func(c *stats.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	call := caller(t, srv.URL)
	path := "/v1/default/entries/" + statstest.Key(0, 0)
	call(http.MethodPut, path, []byte(strings.Repeat("x", 4096)), http.StatusCreated, "X-Cachesvc-Backend", "xla")
	for m := 0; m <= 10; m++ {
		offset.Store(int64(time.Duration(m-40) * time.Minute))
		call(http.MethodGet, path, nil, http.StatusOK, "X-Cachesvc-Backend", "xla")
		call(http.MethodGet, "/v1/default/entries/"+statstest.Key(1, m), nil, http.StatusNotFound, "X-Cachesvc-Backend", "xla")
		srv.Stats().Snapshot(stats.SnapshotOptions{}) // the minute's store sample
	}
	// Down from minute -30 until now.
	offset.Store(0)
	srv.Restart()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?range=1h"),
		waitText("#kpi-lookups", "22"),
		chromedp.Poll[chromedp.Void](`(function(){var c=window.cachesvcDashboard.charts["chart-store"];return !!c && c.u.data[0].length>30;})()`,
			chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	type step struct {
		Found             bool
		Store, Hits, Miss *float64
		Note, Legend      string
	}
	probe := func(at time.Time) step {
		t.Helper()
		js := `(function(at){
			var ch = window.cachesvcDashboard.charts, st = ch["chart-store"].u.data, lk = ch["chart-lookups"].u.data, i;
			for (i = st[0].length - 1; i >= 0 && st[0][i] > at; i--) {}
			var v = function (x) { return x === undefined ? null : x; }, u = ch["chart-store"].u;
			// Hover the step: the legend gives its value.
			u.setCursor({left: u.valToPos(st[0][i], "x"), top: 10});
			var legend = document.querySelector("#chart-store .u-legend .u-series:nth-child(2) .u-value").textContent;
			return {Found: i >= 0, Store: v(st[1][i]), Hits: v(lk[1][i]), Miss: v(lk[2][i]), Note: document.getElementById("range-note").textContent, Legend: legend};
		})(` + strconv.FormatInt(at.Unix(), 10) + `)`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[step](js))
		if err != nil {
			t.Fatal(err)
		}
		if !got.Found {
			t.Fatalf("no step at %v in the charts", at)
		}
		return got
	}
	str := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	now := time.Now()
	for _, tt := range []struct {
		name   string
		at     time.Time
		sample bool
	}{
		{"up (minute -35)", now.Add(-35 * time.Minute), true},
		{"down (minute -20)", now.Add(-20 * time.Minute), false},
		{"down (minute -5)", now.Add(-5 * time.Minute), false},
	} {
		s := probe(tt.at)
		if tt.sample && (s.Store == nil || *s.Store <= 0 || s.Hits == nil || *s.Hits != 1) {
			t.Errorf("%s: store %s hits %s, want the store's size and 1 hit", tt.name, str(s.Store), str(s.Hits))
		}
		if !tt.sample && (s.Store != nil || s.Hits != nil || s.Miss != nil) {
			t.Errorf("%s: store %s hits %s misses %s, want null (no sample) for each", tt.name, str(s.Store), str(s.Hits), str(s.Miss))
		}
		if (s.Legend == "no sample") != !tt.sample {
			t.Errorf("%s: the store chart's legend says %q (sampled: %v)", tt.name, s.Legend, tt.sample)
		}
		if !tt.sample && !strings.Contains(s.Note, "no sample") {
			t.Errorf("range note = %q, want it to say what the shaded steps are", s.Note)
		}
	}
	screenshot(t, ctx, "dashboard-downtime-1280.png", 1280, 900)
}
