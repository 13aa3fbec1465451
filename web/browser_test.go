package web_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// chromiumPath is where Debian's chromium package installs the browser;
// CACHESVC_CHROMIUM overrides it.
func chromiumPath() string {
	if p := os.Getenv("CACHESVC_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser starts headless Chromium and returns a chromedp context. It skips
// the test when Chromium is absent, unless CACHESVC_REQUIRE_BROWSER is set
// (scripts/test.sh sets it), in which case it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CACHESVC_REQUIRE_BROWSER") != "" {
			t.Fatalf("chromium not found at %s and CACHESVC_REQUIRE_BROWSER is set: apt-get install -y chromium (scripts/test.sh does)", path)
		}
		t.Skipf("chromium not found at %s: install it (apt-get install -y chromium) or run scripts/test.sh; set CACHESVC_REQUIRE_BROWSER=1 to make this a failure", path)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1366, 768),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// artifacts returns the repository's test-artifacts directory (gitignored).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "test-artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves a full-page PNG at width × height.
func screenshot(t *testing.T, ctx context.Context, name string, width, height int64) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(width, height),
		chromedp.Sleep(700*time.Millisecond), // charts resize on a 100 ms debounce
	); err != nil {
		t.Fatalf("resize for %s: %v", name, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s (%d bytes)", path, len(png))
}

// waitText waits until the element matched by sel has text containing want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return !!e && e.textContent.indexOf(%q)>=0;})()`, sel, want)
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(30*time.Second))
}

// seedMisses records explained misses of the four kinds the dashboard must
// name, against an entry whose components are indexed.
func seedMisses(st *stats.Stats) {
	base := map[string]string{"module": strings.Repeat("ab", 32), "jaxlib_version": "0.4.38", "platform": "cpu", "xla_flags": "--xla_cpu_enable_fast_math=false"}
	st.Index().Add(statstest.NS[0], "xla", statstest.Key(0, 0), "jit_train_step", time.Now(), base)
	for i, c := range []struct{ comp, val string }{
		{"xla_flags", "--xla_cpu_enable_fast_math=true"}, {"xla_flags", "--xla_cpu_enable_fast_math=true"},
		{"jaxlib_version", "0.4.36"}, {"platform", "cuda"}, {"module", strings.Repeat("cd", 32)},
	} {
		want := map[string]string{}
		for k, v := range base {
			want[k] = v
		}
		want[c.comp] = c.val
		st.RecordMiss(stats.Miss{Namespace: statstest.NS[0], Backend: "xla", Key: fmt.Sprintf("%064x", i+1), DisplayName: "jit_train_step",
			Explanation: st.Explain(statstest.NS[0], "xla", want)})
	}
}

// TestDashboardShowsSeededTraffic drives headless Chromium against a real
// server seeded with 1,000 lookups (750 hits) in two namespaces and two runs,
// checks the numbers on the page and that the uPlot charts are drawn, and
// saves laptop and wide screenshots to test-artifacts/.
func TestDashboardShowsSeededTraffic(t *testing.T) {
	ctx := browser(t)
	// The stats clock spreads the seeded traffic over the last five hours,
	// so that the charts show a history; the totals do not depend on it.
	start := time.Now().Add(-5 * time.Hour)
	var offset atomic.Int64
	srv := statstest.Start(t, func(c *stats.Config) {
		c.Now = func() time.Time { return start.Add(time.Duration(offset.Load())) }
	})
	statstest.SeedWith(t, srv.URL, func(i int) {
		if i >= 0 {
			// Traffic grows over time, and the late lookups hit more.
			f := float64(i) / statstest.Lookups
			offset.Store(int64(5 * time.Hour * time.Duration(1000*math.Sqrt(f)) / 1000))
		}
	})
	offset.Store(int64(5 * time.Hour))
	seedMisses(srv.Stats())

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", "1,000"),
		waitText("#runs-table tbody", "sweep-2"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		function txt(s){var e=document.querySelector(s);return e?e.textContent.trim():null;}
		function row(s){var e=document.querySelector(s);return e?Array.prototype.map.call(e.cells,function(c){return c.textContent.trim();}).join("|"):null;}
		return {
			hitRate: txt("#kpi-hit-rate"), lookups: txt("#kpi-lookups"), hits: txt("#kpi-hits"), misses: txt("#kpi-misses"),
			saved: txt("#kpi-saved-sub"), writes: txt("#kpi-writes"), entries: txt("#kpi-store-sub"),
			run1: row('#runs-table tr[data-run="sweep-1"]'), run2: row('#runs-table tr[data-run="sweep-2"]'),
			nsA: row('#ns-table tr.ns-row[data-ns="team-a"]'), nsB: row('#ns-table tr.ns-row[data-ns="team-b"]'),
			top: String(document.querySelectorAll("#top-table tbody tr[data-key]").length),
			canvases: String(document.querySelectorAll(".chart .uplot canvas").length),
			charts: String(document.querySelectorAll(".chart .uplot").length),
			reasons: txt("#reasons"), recent: txt("#recent-misses"),
			empty: String(document.getElementById("empty-state").hidden),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"hitRate": "75.0%", "lookups": "1,000", "hits": "750", "misses": "250",
		"writes": "10", "top": "10", "charts": "6", "empty": "true",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	contains := map[string][]string{
		"saved":   {"2,437.5 s"},
		"entries": {"10 entries", "on disk"},
		"run1":    {"sweep-1", "team-a, team-b", "500|500|", "100.0%"},
		"run2":    {"sweep-2", "500|250|", "50.0%"},
		"nsA":     {"team-a", "xla", "500|375|125", "75.0%"},
		"nsB":     {"team-b", "xla", "500|375|125", "75.0%"},
		"reasons": {"XLA flags differ", "jaxlib version differs", "platform differs", "module differs"},
		"recent":  {"jit_train_step", "XLA flags differ from the nearest entry"},
	}
	for k, subs := range contains {
		for _, sub := range subs {
			if !strings.Contains(got[k], sub) {
				t.Errorf("%s = %q, want it to contain %q", k, got[k], sub)
			}
		}
	}
	if got["canvases"] != "6" {
		t.Errorf("uPlot canvases = %s, want one per chart (6)", got["canvases"])
	}
	// Clicking a reason shows only its misses.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#reasons .reason[data-reason="platform"]').click()`)); err != nil {
		t.Fatal(err)
	}
	shownReasons, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.prototype.map.call(document.querySelectorAll("#recent-misses .miss"), function (e) { return e.getAttribute("data-reason"); })`))
	if err != nil || len(shownReasons) != 1 || shownReasons[0] != "platform" {
		t.Fatalf("filtered misses = %v (%v)", shownReasons, err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#reasons .reason[data-reason="platform"]').click()`)); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, ctx, "dashboard-laptop.png", 1366, 768)
	checkLayout(t, ctx, "dashboard-wide.png", 2560, 1440)

	// After a restart of the server the page shows the same numbers.
	srv.Restart()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", "1,000"),
		waitText("#kpi-hit-rate", "75.0%"),
		waitText("#runs-table tbody", "sweep-2"),
	); err != nil {
		t.Fatalf("after restart: %v", err)
	}

	// Filtering by namespace shows that namespace's numbers only.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?ns=team-b&range=24h"),
		waitText("#kpi-lookups", "500"),
		waitText("#kpi-hits", "375"),
	); err != nil {
		t.Fatalf("namespace view: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#ns-table tr.ns-row").length`))
	if err != nil || rows != 1 {
		t.Fatalf("namespace view rows = %d, %v", rows, err)
	}
}

// TestDashboardEmptyState checks that an empty cache explains how to connect
// a trainer.
func TestDashboardEmptyState(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), waitText("#live-text", "live")); err != nil {
		t.Fatal(err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("empty-state").hidden`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("empty-state").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if hidden || !strings.Contains(text, "cachesvc.jax.install(\""+srv.URL+"\")") || !strings.Contains(text, "CACHESVC_URL") {
		t.Fatalf("empty state hidden=%v text=%q", hidden, text)
	}
	authShown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("auth-form")).display !== "none"`))
	if err != nil || authShown {
		t.Fatalf("token form shown on a server without auth (%v)", err)
	}
	checkLayout(t, ctx, "dashboard-empty-laptop.png", 1366, 768)
	checkLayout(t, ctx, "dashboard-empty-800.png", 800, 900)

	// Live refresh: traffic that arrives while the page is open appears
	// without a reload, and the charts take their full width.
	statstest.Seed(t, srv.URL)
	if err := chromedp.Do(ctx, waitText("#kpi-lookups", "1,000"), waitText("#kpi-hit-rate", "75.0%"), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatalf("live refresh: %v", err)
	}
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector("#chart-hit-rate .uplot canvas").clientWidth`))
	if err != nil || width < 400 {
		t.Fatalf("hit rate chart is %d px wide after the page filled (%v)", width, err)
	}
}

// serverWithTokens starts a stats server that accepts only the given tokens.
func serverWithTokens(t *testing.T, tokens ...authtest.Token) *statstest.Server {
	t.Helper()
	g, err := auth.NewGuard(authtest.WriteTokens(t, tokens, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	return statstest.StartWith(t, nil, func(c *api.Config) { c.Auth = g })
}

// enterToken types secret into the page's token prompt and submits it.
func enterToken(secret string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.getElementById("auth-token").value = "` + secret + `"; document.querySelector("#auth-form button").click();`)
}

// TestDashboardAsksForToken checks that on a server with authentication the
// page asks for a token, and shows the statistics once given one.
func TestDashboardAsksForToken(t *testing.T) {
	ctx := browser(t)
	admin := authtest.Token{Name: "alice", Secret: "s3cr3t-dashboard-admin", Scopes: "*:admin"}
	srv := serverWithTokens(t, admin)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#live-text", "token needed"),
	); err != nil {
		t.Fatalf("no token prompt: %v", err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("auth-form")).display !== "none"`))
	if err != nil || !shown {
		t.Fatalf("token form not shown (%v)", err)
	}
	// Nothing has been read: no blank charts or headings-only tables
	// under the prompt.
	blank, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.prototype.filter.call(document.querySelectorAll(".charts, .tables"),
		function (e) { return getComputedStyle(e).display !== "none"; }).map(function (e) { return e.className; })`))
	if err != nil || len(blank) != 0 {
		t.Errorf("before any answer the page shows %v (%v), want no charts or tables", blank, err)
	}
	checkLayout(t, ctx, "dashboard-token-800.png", 800, 900)
	if err := chromedp.Do(ctx,
		enterToken(admin.Secret),
		waitText("#live-text", "live"),
		waitText("#kpi-lookups", "0"),
	); err != nil {
		t.Fatalf("after entering the token: %v", err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("auth-form")).display === "none" && !document.getElementById("empty-state").hidden`))
	if err != nil || !hidden {
		t.Fatalf("token form still shown or empty state hidden (%v)", err)
	}
}
