package web_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardFormatsLikeCachesvcStats: the dashboard and `cachesvc stats`
// print the same bytes, durations, hit rates and counts ("1 entry") the same way, so that a user who
// compares them sees one number ("216 KiB" in both, not 215.8 KiB in the
// terminal).
func TestDashboardFormatsLikeCachesvcStats(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	byteCases := []int64{0, 1, 1023, 1024, 1280, 1536, 102912, 103936, 102399, 102400, 220979, 10 << 20, 150 << 30, 3 << 50, 1 << 62}
	secCases := []float64{0, 0.25, 0.5, 6, 32.25, 32.5, 119.9, 120, 319.5, 7199, 7200, 86400, 3 * 86400, 40 * 86400}
	rateCases := []float64{0, 1.0 / 16, 1.0 / 3, 0.5, 0.63157894736, 0.9995, 1}
	countCases := []int64{0, 1, 2, 999, 1000, 1234567}
	cs, _ := json.Marshal(countCases)
	rs, _ := json.Marshal(rateCases)
	bs, _ := json.Marshal(byteCases)
	ss, _ := json.Marshal(secCases)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), waitText("#live-text", "live")); err != nil {
		t.Fatal(err)
	}
	// map passes the index as a second argument: call each with one.
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](fmt.Sprintf(`[%s.map(function (n) { return CS.bytes(n); }), %s.map(function (s) { return CS.dur(s); }),
		%s.map(function (r) { return CS.pct(r); }), %s.map(function (n) { return CS.plural(n, "entry", "entries"); })]`, bs, ss, rs, cs)))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range byteCases {
		if want := report.Bytes(n); got[0][i] != want {
			t.Errorf("%d bytes: dashboard %q, cachesvc stats %q", n, got[0][i], want)
		}
	}
	for i, r := range rateCases {
		if want := report.Rate(r, 1); got[2][i] != want {
			t.Errorf("hit rate %v: dashboard %q, cachesvc stats %q", r, got[2][i], want)
		}
	}
	for i, n := range countCases {
		if want := report.Plural(n, "entry", "entries"); got[3][i] != want {
			t.Errorf("%d entries: dashboard %q, cachesvc stats %q", n, got[3][i], want)
		}
	}
	for i, s := range secCases {
		if want := report.Duration(s); got[1][i] != want {
			t.Errorf("%v s: dashboard %q, cachesvc stats %q", s, got[1][i], want)
		}
	}
}
