package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestDashboardChartsAFirstRunsSavingInSeconds checks what a new user sees
// after a first hit that saved a few seconds: the cumulative chart's axis
// and legend read in seconds, every tick label distinct (in hours they all
// read 0.00 h), and so does the "Compile time saved" card, in the unit
// cachesvc stats prints ("6 s", not "0.00 h").
func TestDashboardChartsAFirstRunsSavingInSeconds(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	call := caller(t, srv.URL)
	path := "/v1/default/entries/" + statstest.Key(1, 1)
	call(http.MethodPut, path, []byte("executable"), http.StatusCreated, "X-Compile-Seconds", "6", "X-Cachesvc-Backend", "xla")
	call(http.MethodGet, path, nil, http.StatusOK, "X-Cachesvc-Backend", "xla")

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-saved-sub", "6 s"),
		chromedp.Poll[chromedp.Void](`(function(){var c=window.cachesvcDashboard.charts["chart-saved"];
			return !!c && c.u.data[1].some(function(v){return v>0;}) && !!c.u.axes[1]._values;})()`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Sleep(300*time.Millisecond),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	kpi, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("kpi-saved").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if want := report.Duration(6); kpi != want {
		t.Errorf("Compile time saved card reads %q, want %q as cachesvc stats prints it", kpi, want)
	}
	// The store card counts its one entry in the singular.
	storeSub, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("kpi-store-sub").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(storeSub, "1 entry · ") {
		t.Errorf("store card reads %q, want it to start \"1 entry · \"", storeSub)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(function(){
		var u = window.cachesvcDashboard.charts["chart-saved"].u;
		return {ticks: u.axes[1]._values.slice(), label: u.series[1].label, last: u.data[1][u.data[1].length-1]};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got["label"] != "seconds saved" || got["last"] != float64(6) {
		t.Errorf("chart-saved series %q ends at %v, want \"seconds saved\" ending at 6", got["label"], got["last"])
	}
	ticks, _ := got["ticks"].([]any)
	seen := map[string]bool{}
	for _, v := range ticks {
		s, _ := v.(string)
		if seen[s] || !strings.HasSuffix(s, " s") {
			t.Errorf("axis ticks %v: %q repeated or not in seconds", ticks, s)
		}
		seen[s] = true
	}
	if len(ticks) < 2 {
		t.Errorf("axis ticks %v: want at least two", ticks)
	}
}

// TestDashboardTellsAReaderHowToOpenItsNamespace checks the hint a user with
// a read token for one namespace gets on the all-namespaces view: the
// namespace menu is empty then, so the hint gives the address to open, and
// that address works.
func TestDashboardTellsAReaderHowToOpenItsNamespace(t *testing.T) {
	ctx := browser(t)
	reader := authtest.Token{Name: "trainer", Secret: "s3cr3t-dashboard-reader", Scopes: "default:read"}
	srv := serverWithTokens(t, reader)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#live-text", "token needed"),
		enterToken(reader.Secret),
		waitText("#auth-text", "lacks"),
	); err != nil {
		t.Fatalf("reader on the all-namespaces view: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("auth-text").textContent + " | options: " + document.getElementById("ns-select").options.length`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "choose it above") || !strings.Contains(text, srv.URL+"/?ns=NAME") {
		t.Errorf("hint %q: want the address to open (%s/?ns=NAME), not a menu with nothing to choose", text, srv.URL)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?ns=default"),
		waitText("#live-text", "live"),
	); err != nil {
		t.Fatalf("the hinted address with the reader's token: %v", err)
	}
}

// TestDashboardEmptyStateSaysTrainersNeedATokenToo checks the empty page's
// setup steps: on a server read with a token they say how to give trainers
// one (else a trainer that follows them gets 401 on every call); without
// authentication they do not mention tokens.
func TestDashboardEmptyStateSaysTrainersNeedATokenToo(t *testing.T) {
	ctx := browser(t)
	open := statstest.Start(t, nil)
	if err := chromedp.Do(ctx, chromedp.Navigate(open.URL+"/"), waitText("#live-text", "live")); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("empty-token").hidden`))
	if err != nil || shown {
		t.Fatalf("token step shown on a server without authentication (%v)", err)
	}

	admin := authtest.Token{Name: "ops", Secret: "s3cr3t-dashboard-ops", Scopes: "*:admin"}
	srv := serverWithTokens(t, admin)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#live-text", "token needed"),
		enterToken(admin.Secret),
		waitText("#live-text", "live"),
	); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("empty-state").hidden ? "" : document.getElementById("empty-state").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CACHESVC_TOKEN_FILE", "cachesvc token new", "write"} {
		if !strings.Contains(text, want) {
			t.Errorf("empty state on a server with tokens does not say %q:\n%s", want, text)
		}
	}
}
