package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// layoutCheckJS returns, as a list of sentences, every place where the page
// overflows or clips. The rule, for every visible card (.card, .kpi, the
// empty state's .step, and the header bar):
//
//  1. Every visible descendant's border box lies inside the card's (1 px
//     of rounding allowed), unless an element between them clips it
//     (overflow other than visible): then that element is checked instead.
//  2. Every element whose overflow-x is not visible (hidden, clip, auto or
//     scroll) has scrollWidth <= clientWidth: text cut off or a table that
//     scrolls sideways is clipping. The one exception is an element cut on
//     purpose: text-overflow: ellipsis and a title attribute that begins
//     with its whole text (a trailing "…" the page added removed), so that
//     hovering shows everything.
//  3. Every element whose overflow-y is hidden or clip has scrollHeight <=
//     clientHeight. overflow-y auto is allowed: long lists scroll down.
//
// And no text reads NaN, undefined, Infinity or null (a number the page
// could not format).
//
// And the page itself does not scroll sideways. uPlot's cursor elements
// (parked off the plot while the pointer is away) are not content and are
// skipped.
const layoutCheckJS = `(function(){
  var out = [], SKIP = ".u-cursor-x,.u-cursor-y,.u-cursor-pt,.u-select";
  function vis(e) {
    var cs = getComputedStyle(e);
    if (cs.display === "none" || cs.visibility === "hidden") return false;
    var r = e.getBoundingClientRect();
    return r.width > 0 || r.height > 0;
  }
  function name(e) {
    var s = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "");
    if (typeof e.className === "string" && e.className.trim()) s += "." + e.className.trim().split(/\s+/).join(".");
    var t = (e.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    return s + (t ? ' "' + t + '"' : "");
  }
  function clips(e) { var cs = getComputedStyle(e); return cs.overflowX !== "visible" || cs.overflowY !== "visible"; }
  function box(r) { return "[" + Math.round(r.left) + "," + Math.round(r.top) + " → " + Math.round(r.right) + "," + Math.round(r.bottom) + "]"; }
  var doc = document.documentElement;
  // A number the page could not format reads NaN, undefined or Infinity.
  var bad = /\b(NaN|undefined|Infinity|null)\b/.exec(document.body.innerText);
  if (bad) out.push("the page shows " + bad[1] + ": …" + document.body.innerText.slice(Math.max(0, bad.index - 60), bad.index + 40).replace(/\s+/g, " ") + "…");
  if (doc.scrollWidth > innerWidth + 1) out.push("the page scrolls sideways: " + doc.scrollWidth + " px wide in a " + innerWidth + " px window");
  document.querySelectorAll(".card, .kpi, .step, header.top, .reason").forEach(function (card) {
    if (!vis(card)) return;
    var cr = card.getBoundingClientRect(), cn = name(card).slice(0, 50);
    [card].concat(Array.prototype.slice.call(card.querySelectorAll("*"))).forEach(function (e) {
      if (e.closest(SKIP) || !vis(e)) return;
      if (e !== card) {
        var clipped = false;
        for (var a = e.parentElement; a && a !== card; a = a.parentElement) if (clips(a)) { clipped = true; break; }
        var r = e.getBoundingClientRect();
        if (!clipped && (r.left < cr.left - 1 || r.right > cr.right + 1 || r.top < cr.top - 1 || r.bottom > cr.bottom + 1))
          out.push(name(e) + " " + box(r) + " overflows its card " + cn + " " + box(cr));
      }
      var cs = getComputedStyle(e);
      if (cs.overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1) {
        var text = (e.textContent || "").trim().replace(/…$/, "");
        var title = e.getAttribute("title") || "";
        if (!(cs.textOverflow === "ellipsis" && title && title.indexOf(text) === 0))
          out.push(name(e) + " is clipped sideways (" + e.scrollWidth + " px of content in " + e.clientWidth + ") in " + cn);
      }
      if ((cs.overflowY === "hidden" || cs.overflowY === "clip") && e.scrollHeight > e.clientHeight + 1)
        out.push(name(e) + " is cut off below (" + e.scrollHeight + " px of content in " + e.clientHeight + ") in " + cn);
    });
  });
  return out;
})()`

// checkLayout resizes the page to width × height, lets the charts follow,
// fails t for every overflow or clipping layoutCheckJS finds, and saves a
// full-page screenshot as name.
//
// A problem that begins with one of allowed is deliberate at that size.
func checkLayout(t *testing.T, ctx context.Context, name string, width, height int64, allowed ...string) {
	t.Helper()
	screenshot(t, ctx, name, width, height)
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](layoutCheckJS))
	if err != nil {
		t.Fatalf("layout check at %dx%d: %v", width, height, err)
	}
next:
	for _, b := range bad {
		for _, a := range allowed {
			if strings.HasPrefix(b, a) {
				continue next
			}
		}
		t.Errorf("%dx%d (%s): %s", width, height, name, b)
	}
}

// seedNamespaces is the traffic of a busy server, sent through its HTTP
// API: 15 namespaces, each with xla entries looked up by key (GET with
// X-Cachesvc-Backend), torch FX graphs looked up by signature through the
// pt2 plugin and Triton kernels through the passthrough plugin, under three
// arms of the sweep "lr-sweep"; every third namespace also gets raw GET
// misses (no backend). advance moves the stats clock on.
type seeded struct {
	lookups, rawMisses int
	namespaces         []string
}

func seedNamespaces(t *testing.T, base string, advance func()) seeded {
	t.Helper()
	var s seeded
	call := caller(t, base)
	names := []string{"vision", "speech", "ranking-v2", "llm-pretrain", "llm-finetune", "recsys", "ads-ctr", "search",
		"robotics-sim", "protein-folding-research-group", "weather", "translate", "ocr", "tts", "default"}
	arms := []string{"lr-sweep:lr-1e-3", "lr-sweep:lr-3e-4", "lr-sweep:lr-1e-4"}
	// Rounds two minutes apart: every namespace is busy in each, so that
	// each row's sparkline has a history. Round 0 stores the xla entries.
	const rounds = 10
	advance()
	for i, ns := range names {
		s.namespaces = append(s.namespaces, ns)
		for j := 0; j < 2; j++ {
			call(http.MethodPut, fmt.Sprintf("/v1/%s/entries/%s", ns, statstest.Key(i, j)), []byte("xla executable "+ns), http.StatusCreated,
				"X-Cachesvc-Backend", "xla", "X-Compile-Seconds", fmt.Sprint(20+i), "X-Cachesvc-Name", fmt.Sprintf("jit_train_step_%d", j))
		}
	}
	sigs := func(i int) [][]byte {
		return [][]byte{
			pt2Signature(fmt.Sprintf("fxgraph%02d", i), "aaaa"),
			passthroughSignature(i),
		}
	}
	for r := 0; r < rounds; r++ {
		advance()
		for i, ns := range names {
			// xla by key: 4+i lookups, every fourth a miss (the first one
			// of each arm's, so that time to first hit is not zero).
			for _, k := range []int{r, r + rounds} {
				if k >= 4+i {
					continue
				}
				key, want := statstest.Key(i, k%2), http.StatusOK
				if k%4 == 0 {
					key, want = statstest.Key(i, 100+k), http.StatusNotFound
				}
				call(http.MethodGet, fmt.Sprintf("/v1/%s/entries/%s", ns, key), nil, want, "X-Cachesvc-Backend", "xla", "X-Cachesvc-Run", arms[k%3])
				s.lookups++
			}
			// pt2 and passthrough by signature: a miss and its upload in
			// round i%3, then 1 to 4 hits in the rounds after.
			for b, sig := range sigs(i) {
				run := arms[(i+b)%3]
				switch d := r - i%3; {
				case d == 0:
					miss := call(http.MethodPost, "/v1/"+ns+"/lookup", sig, http.StatusNotFound, "X-Cachesvc-Run", run)
					key := miss.Header.Get(wire.HeaderKey)
					call(http.MethodPut, "/v1/"+ns+"/entries/"+key, []byte(`{"time_taken_ms": 18600}`), http.StatusCreated, "X-Compile-Seconds", "18.6", "X-Cachesvc-Run", run)
					s.lookups++
				case d > 0 && d <= 1+(i+b)%4:
					call(http.MethodPost, "/v1/"+ns+"/lookup", sig, http.StatusOK, "X-Cachesvc-Run", arms[(i+b+d)%3])
					s.lookups++
				}
			}
			// Raw GET misses (no backend) in every third namespace.
			if i%3 == 0 && r%3 == 2 {
				call(http.MethodGet, fmt.Sprintf("/v1/%s/entries/%s", ns, statstest.Key(i, 200+r)), nil, http.StatusNotFound)
				s.lookups++
				s.rawMisses++
			}
		}
	}
	return s
}

// passthroughSignature is namespace i's passthrough signature: a Triton
// kernel's key, or in every other namespace a JAX key as stock JAX and the
// agent send it (its module name and 64 hex digits, one long word that
// must still fit the recent misses' cards).
func passthroughSignature(i int) []byte {
	if i%2 == 0 {
		return []byte(fmt.Sprintf(`{"backend":"passthrough","kind":"jax","key":"jit_train_step-%064x"}`, i))
	}
	return []byte(fmt.Sprintf(`{"backend":"passthrough","kind":"triton","key":"triton_poi_fused_add_%d"}`, i))
}

// caller returns a function that sends one request to base+path with
// body and header pairs, drains the answer and fails t unless its status
// is want.
func caller(t *testing.T, base string) func(method, path string, body []byte, want int, headers ...string) *http.Response {
	return func(method, path string, body []byte, want int, headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: status %d, want %d", method, path, resp.StatusCode, want)
		}
		return resp
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDashboardLayoutFitsAtLaptopAndWideSizes seeds a real server (with the
// built-in plugins) with a busy day's shape, spread over the last 20
// minutes by the stats clock, and checks at 1366×768 and 2560×1440 that no
// element overflows its card and no text is clipped (layoutCheckJS), that
// the charts start at the first datum rather than six hours back, that the
// table has a row and a sparkline per namespace and per backend with the
// raw GET misses apart, and then the namespace view (the store card is the
// namespace's) and the sweep view. It first proves that the check catches
// an overflowing element and clipped text. Screenshots go to
// test-artifacts/.
func TestDashboardLayoutFitsAtLaptopAndWideSizes(t *testing.T) {
	ctx := browser(t)
	keyer := keyingtest.Keyer(t, plugins.Config{PoolSize: 1}, keying.Config{})
	start := time.Now().Add(-20 * time.Minute)
	var offset atomic.Int64
	srv := statstest.StartWith(t, func(c *stats.Config) {
		c.Now = func() time.Time { return start.Add(time.Duration(offset.Load())) }
	}, func(c *api.Config) { c.Keyer = keyer })
	// Two namespaces have quotas (one by bytes, one by entries); the rest
	// none.
	if err := srv.Store.SetQuotas(store.Quotas{Namespaces: map[string]store.Quota{
		"protein-folding-research-group": {MaxBytes: 4 << 10, MaxIdle: 24 * time.Hour},
		"vision":                         {MaxEntries: 10},
	}}); err != nil {
		t.Fatal(err)
	}
	got := seedNamespaces(t, srv.URL, func() { offset.Add(int64(110 * time.Second)) })
	offset.Store(int64(time.Since(start)))

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", grouped(got.lookups)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#ns-table tr.ns-row").length === 15 &&
			window.cachesvcDashboard.state.fitFrom != null && !!window.cachesvcDashboard.charts["chart-hit-rate"] &&
			document.getElementById("range-note").textContent !== ""`, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}

	// The check is not vacuous: a wide element and a clipped label fail it.
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(function(){
		var w = document.createElement("div"); w.id = "probe-wide"; w.style.width = "5000px"; w.textContent = "wide NaN";
		document.querySelector(".chart-card").appendChild(w);
		var l = document.getElementById("kpi-store-label"), keep = l.textContent;
		l.removeAttribute("title"); l.textContent = "a label far too long to fit the card it sits in, cut off by its ellipsis";
		var out = `+layoutCheckJS+`;
		w.remove(); l.textContent = keep; l.title = keep;
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if joined := strings.Join(bad, "\n"); !strings.Contains(joined, "div#probe-wide") || !strings.Contains(joined, "div#kpi-store-label") ||
		!strings.Contains(joined, "the page shows NaN") {
		t.Fatalf("the layout check missed a planted overflow, clipped label or NaN; it found:\n%s", joined)
	}

	checkLayout(t, ctx, "dashboard-1366.png", 1366, 768)
	checkLayout(t, ctx, "dashboard-2560.png", 2560, 1440)
	// A 1280-pixel laptop fits every table, and so do 1024 and 800 pixels
	// (half a laptop's screen): the namespace table's headings wrap and its
	// lower-value columns give way (TestDashboardNarrowTablesFit), the run
	// ids wrap and the sweep shows as many arms as fit. The misses' reasons
	// keep their counts out of the recent misses beside them.
	checkLayout(t, ctx, "dashboard-1280.png", 1280, 800)
	checkLayout(t, ctx, "dashboard-1024.png", 1024, 768)
	checkLayout(t, ctx, "dashboard-800.png", 800, 900)

	view, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(function(){
		var d = window.cachesvcDashboard, u = d.charts["chart-hit-rate"].u;
		function row(s){var e=document.querySelector(s);return e?Array.prototype.map.call(e.cells,function(c){return c.textContent.trim();}).join("|"):"";}
		return {
			xmin: u.scales.x.min, series: u.series.length - 1, legend: document.querySelectorAll("#chart-hit-rate .u-legend .u-series").length,
			sparks: document.querySelectorAll("#ns-table tr.ns-row svg.spark").length,
			backends: Array.prototype.map.call(document.querySelectorAll("#ns-table tr.be-row"), function(r){return r.getAttribute("data-backend");}).join(","),
			raw: row('#ns-table tr.be-row.raw'), closed: document.querySelectorAll("#ns-table tr.ns-row.closed").length,
			vision: row('#ns-table tr.ns-row[data-ns="vision"]'), protein: row('#ns-table tr.ns-row[data-ns="protein-folding-research-group"]'),
			ocr: row('#ns-table tr.ns-row[data-ns="ocr"]'), footnote: !document.getElementById("ns-footnote").hidden,
			savedDots: d.charts["chart-saved"].u.series[1].points.filter(d.charts["chart-saved"].u, 1).length,
			savedSteps: d.charts["chart-saved"].u.data[0].length,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	// The charts start at the first datum: within the 20 minutes seeded
	// (plus one coarse step of the probe), not six hours back.
	if xmin, _ := view["xmin"].(float64); xmin < float64(start.Add(-6*time.Minute).Unix()) {
		t.Errorf("hit rate chart starts at %v, want at the first datum (after %v)", time.Unix(int64(xmin), 0), start)
	}
	want := map[string]any{"series": 1.0, "legend": 2.0, "sparks": 15.0, "backends": "passthrough,pt2,xla,unknown", "closed": 15.0, "footnote": true}
	for k, v := range want {
		if view[k] != v {
			t.Errorf("%s = %v, want %v", k, view[k], v)
		}
	}
	if raw, _ := view["raw"].(string); !strings.HasPrefix(raw, fmt.Sprintf("raw GET misses †|no backend|%d|0|%d|not counted", got.rawMisses, got.rawMisses)) {
		t.Errorf("raw GET misses row = %q", raw)
	}
	// vision (namespace 0): 4 xla lookups (3 hits), pt2 and passthrough 1
	// miss + 1 and 2 hits; its 3 raw GET misses are apart.
	if v, _ := view["vision"].(string); !strings.HasPrefix(v, "vision|all (3)|9|6|3|66.7%") {
		t.Errorf("vision row = %q, want 9 lookups, 6 hits, 3 misses (raw GET misses left out)", v)
	}
	// With 15 namespaces their backend rows are folded; a click shows
	// vision's: three backends and its raw GET misses apart.
	opened, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){
		document.querySelector('#ns-table tr.ns-row[data-ns="vision"] td').click();
		return Array.prototype.map.call(document.querySelectorAll('#ns-table tr.sub[data-ns="vision"]'), function (r) {
			return r.cells[1].textContent + ":" + r.cells[2].textContent; }).join(",");
	})()`))
	if err != nil || opened != "passthrough:3,pt2:2,xla:4,raw GET misses †:3" {
		t.Errorf("vision's backend rows after a click = %q (%v)", opened, err)
	}
	// A click on a heading sorts by it, busiest first, and again reverses.
	order, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(function(){
		function ns() { return Array.prototype.map.call(document.querySelectorAll("#ns-table tr.ns-row"), function (r) { return r.getAttribute("data-ns"); }); }
		var th = document.querySelector('#ns-table th[data-sort="lookups"]');
		th.click(); var desc = ns(); th.click(); var asc = ns();
		return [desc[0], desc[14], asc[0], th.getAttribute("aria-sort")];
	})()`))
	if err != nil || strings.Join(order, ",") != "default,vision,vision,ascending" {
		t.Errorf("sorting by lookups gave first, last, first reversed, aria-sort = %v (%v); want default (the busiest) first", order, err)
	}
	// The last column is the namespace's stored data against its quota.
	for k, suffix := range map[string]string{"vision": "4 entries / 10 entries", "protein": " / 4.0 KiB", "ocr": " no quota"} {
		if v, _ := view[k].(string); !strings.HasSuffix(v, suffix) {
			t.Errorf("%s row = %q, want its usage to end in %q", k, v, suffix)
		}
	}
	// Compile hours saved: a dot only on steps that saved something.
	if dots, _ := view["savedDots"].(float64); dots == 0 || dots > 15 {
		t.Errorf("compile-hours chart marks %v of %v steps, want only the steps with hits", dots, view["savedSteps"])
	}

	// Namespace view: its own numbers, the store card scoped to it.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?ns=protein-folding-research-group"),
		waitText("#kpi-hit-rate-sub", "lookups hit"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#ns-table tr.ns-row").length === 1`, chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("namespace view: %v", err)
	}
	card, err := chromedp.Run(ctx, chromedp.Evaluate[string](`["kpi-store-label", "kpi-store", "kpi-store-sub"].map(function (id) {
		return document.getElementById(id).textContent; }).join("|")`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(card, "Store · protein-folding-research-group|") || !strings.Contains(card, " / 4.0 KiB|4 entries · ") || !strings.HasSuffix(card, "% of quota") {
		t.Errorf("store card in the namespace view = %q, want the namespace's usage against its quota", card)
	}
	// The store chart is the namespace's own stored bytes against its
	// quota (its own series), never the whole server's; the evictions
	// chart is still the server's, and says so.
	resp, err := http.Get(srv.URL + "/v1/protein-folding-research-group/stats")
	if err != nil {
		t.Fatal(err)
	}
	var nsStats wire.StatsResponse
	err = json.NewDecoder(resp.Body).Decode(&nsStats)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(function(){
		var u = window.cachesvcDashboard.charts["chart-store"].u, most = 0, samples = 0;
		u.data[1].forEach(function (v) { if (v != null) { samples++; if (v > most) most = v; } });
		return {titles: ["store-chart-title", "evictions-chart-title"].map(function (id) { return document.getElementById(id).textContent; }).join("|"),
			most: most, samples: samples, limit: u.data[2] ? u.data[2][u.data[2].length - 1] : null};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if chart["titles"] != "Stored in protein-folding-research-group against its quota|Evictions and integrity failures (whole server)" {
		t.Errorf("chart titles in the namespace view = %q", chart["titles"])
	}
	if own := float64(nsStats.Store.Bytes); own == 0 || chart["most"] != own || chart["samples"].(float64) == 0 || chart["limit"] != float64(4<<10) {
		t.Errorf("store chart in the namespace view = %v; want the namespace's %v bytes at most, against its 4 KiB quota", chart, own)
	}
	checkLayout(t, ctx, "dashboard-ns-1366.png", 1366, 768)

	// Sweep view: the three arms side by side.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?sweep=lr-sweep"),
		waitText("#sweep-summary", "3 arms"),
	); err != nil {
		t.Fatalf("sweep view: %v", err)
	}
	arms, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		var t = document.getElementById("sweep-table"), o = {head: Array.prototype.map.call(t.tHead.rows[0].cells, function(c){return c.textContent;}).join("|")};
		Array.prototype.forEach.call(t.tBodies[0].rows, function(r){ o[r.cells[0].textContent] = Array.prototype.slice.call(r.cells, 1).map(function(c){return c.textContent;}).join("|"); });
		return o;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if arms["head"] != "Arm|lr-1e-3|lr-1e-4|lr-3e-4" {
		t.Errorf("sweep columns = %q", arms["head"])
	}
	// lr-1e-3's first lookup (round 0) missed; its first hit came two
	// rounds (220 s) later.
	if ttfh := strings.Split(arms["Time to first hit"], "|")[0]; ttfh != "3.7 min" {
		t.Errorf("lr-1e-3's time to first hit = %q, want 3.7 min", ttfh)
	}
	for _, row := range []string{"Compiles avoided (hits)", "Time to first hit", "Hit rate"} {
		if cells := strings.Split(arms[row], "|"); len(cells) != 3 || cells[0] == "–" {
			t.Errorf("sweep row %q = %q, want a value per arm", row, arms[row])
		}
	}
	checkLayout(t, ctx, "dashboard-run-view.png", 1366, 768)
}

// grouped formats n as the page does (en-US, with thousands separators).
func grouped(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
