package web_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store"
)

// The long labels of a real deployment: namespaces of up to 63 characters
// (cachekey's limit), run ids of a sweep launcher that put the whole
// configuration in the arm's name, and entry names of nested jit functions.
var (
	longNamespaces = []string{
		"protein-structure-prediction-research-group-alphafold-finetune", // 63
		"speech-recognition-multilingual-conformer-xl-production-serving",
		"vision",
	}
	longSweep = "llama-70b-pretrain-lr-sweep-2026-12"
	// longArmLookups is each arm's lookups: the busiest in the millions.
	longArmLookups = []int{1_234_567, 345_678, 98_765, 45_678, 12_345, 9_876, 5_432, 2_345, 1_234, 987}
)

// longArm returns the run id of arm k of longSweep.
func longArm(k int) string {
	return fmt.Sprintf("%s:lr-%de-4-warmup-2000-cosine-bs-4096-seed-%d", longSweep, k+1, 1000+k)
}

// seedLongLabels fills a real server with the traffic of a busy site whose
// labels are as long as cachesvc accepts and whose counts run to millions:
// two entries per namespace over HTTP (so that the store holds the
// namespaces' bytes), the lookups of ten sweep arms straight into the
// server's stats (1.76 million through HTTP would take minutes), each arm
// across the three namespaces, and raw GET misses over HTTP.
func seedLongLabels(t *testing.T, srv *statstest.Server) {
	t.Helper()
	call := caller(t, srv.URL)
	keys := make([][32]byte, len(longNamespaces))
	for i, ns := range longNamespaces {
		for j := 0; j < 2; j++ {
			key := statstest.Key(i, j)
			call(http.MethodPut, fmt.Sprintf("/v1/%s/entries/%s", ns, key), []byte(strings.Repeat("x", 4000+j)), http.StatusCreated,
				"X-Cachesvc-Backend", "xla", "X-Compile-Seconds", "95.5", "X-Cachesvc-Run", longArm(0),
				"X-Cachesvc-Name", "jit_train_step_with_gradient_accumulation_and_rematerialisation")
		}
		keys[i] = sha256.Sum256([]byte(ns))
		// Raw GET misses (no backend), shown apart in the table.
		call(http.MethodGet, fmt.Sprintf("/v1/%s/entries/%s", ns, statstest.Key(i, 99)), nil, http.StatusNotFound)
	}
	st := srv.Stats()
	for k, n := range longArmLookups {
		run := longArm(k)
		for i := 0; i < n; i++ {
			ns := i % len(longNamespaces)
			st.RecordLookup(stats.Lookup{Namespace: longNamespaces[ns], Backend: "xla", Run: run, Key: keys[ns],
				Name: "jit_train_step_with_gradient_accumulation_and_rematerialisation", Hit: i%10 < 7,
				Bytes: 700 << 20, CompileSeconds: 95.5})
		}
	}
}

// narrowCheckJS returns, for each table that must fit, how wide its
// content is against the width it is shown in, and the page's own widths.
const narrowCheckJS = `(function(){
  var out = {};
  ["ns-table", "runs-table", "sweep-table", "quota-table", "top-table"].forEach(function (id) {
    var t = document.getElementById(id), box = t.closest(".scroll");
    out[id] = {scroll: box.scrollWidth, client: box.clientWidth, table: t.offsetWidth, shown: !!box.offsetParent};
  });
  out.page = {scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth};
  return out;
})()`

type widths struct {
	Scroll int  `json:"scroll"`
	Client int  `json:"client"`
	Table  int  `json:"table"`
	Shown  bool `json:"shown"`
}

// TestDashboardNarrowTablesFit loads a dashboard full of long names and
// large numbers and checks, at 800 pixels (half a laptop screen) and 1024,
// that the namespace, runs and sweep tables (and the quota and top entry
// tables) fit their cards without a sideways scrollbar, that neither does
// the page, and that nothing overflows or is clipped without its title
// (layoutCheckJS); at 1400 pixels the layout check too. Screenshots go to
// test-artifacts/.
func TestDashboardNarrowTablesFit(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	if err := srv.Store.SetQuotas(store.Quotas{Namespaces: map[string]store.Quota{
		longNamespaces[0]: {MaxBytes: 64 << 10, MaxIdle: 24 * time.Hour},
	}}); err != nil {
		t.Fatal(err)
	}
	seedLongLabels(t, srv)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?sweep="+longSweep),
		waitText("#kpi-lookups", "1,756,910"),
		waitText("#sweep-summary", "10 arms"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#ns-table tr.ns-row").length === 3`, chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	for _, size := range []struct{ w, h int64 }{{800, 900}, {1024, 768}, {1280, 800}} {
		checkLayout(t, ctx, fmt.Sprintf("dashboard-long-%d.png", size.w), size.w, size.h)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]widths](narrowCheckJS))
		if err != nil {
			t.Fatal(err)
		}
		for id, w := range got {
			if id != "page" && !w.Shown {
				t.Errorf("at %d px: #%s is not shown", size.w, id)
			}
			if w.Scroll > w.Client || w.Table > w.Client && id != "page" {
				t.Errorf("at %d px: #%s scrolls sideways: %d px of content (table %d px) in %d", size.w, id, w.Scroll, w.Table, w.Client)
			}
		}
	}
	checkLayout(t, ctx, "dashboard-long-1400.png", 1400, 900)

	// The namespace view of the longest name: its store card and chart
	// titles carry the name, and still fit.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/?ns="+longNamespaces[0]),
		waitText("#store-chart-title", "Stored in "+longNamespaces[0]),
	); err != nil {
		t.Fatalf("namespace view: %v", err)
	}
	// Its one raw GET miss is one, and the hit rate chart is its own.
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`["kpi-hit-rate-sub", "hit-rate-hint"].map(function (id) { return document.getElementById(id).textContent; })`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got[0], " · 1 raw GET miss\u00a0†") || got[1] != "(all of "+longNamespaces[0]+"'s lookups; each backend in the table)" {
		t.Errorf("namespace view: hit rate card %q, chart hint %q; want 1 raw GET miss and the namespace's lookups", got[0], got[1])
	}
	checkLayout(t, ctx, "dashboard-long-ns-800.png", 800, 900)
	checkLayout(t, ctx, "dashboard-long-ns-1400.png", 1400, 900)
}

// axisFitJS returns, for each chart whose y axis is narrower than its
// widest tick label (measured as uPlot draws it, plus its ticks and gap),
// a sentence: uPlot cuts such a label at the card's edge ("000,000").
const axisFitJS = `(function(){
  var out = [], charts = window.cachesvcDashboard.charts;
  Object.keys(charts).forEach(function (id) {
    var u = charts[id].u, a = u.axes[1], widest = 0;
    u.ctx.font = a.font[0];
    (a._values || []).forEach(function (v) { widest = Math.max(widest, u.ctx.measureText(v).width / devicePixelRatio); });
    if (widest + a.ticks.size + a.gap > a._size) out.push(id + ": labels " + (a._values || []).join(" ") + " need " + Math.ceil(widest + a.ticks.size + a.gap) + " px, the axis has " + a._size);
  });
  return out;
})()`

// timeLabelsJS returns, for each chart, every pair of neighbouring time
// axis labels (their first lines, centred on their ticks as uPlot draws
// them) less than 3 px apart.
const timeLabelsJS = `(function(){
  var out = [], charts = window.cachesvcDashboard.charts;
  Object.keys(charts).forEach(function (id) {
    var u = charts[id].u, a = u.axes[0], splits = a._splits || [], vals = a._values || [], boxes = [];
    u.ctx.font = a.font[0];
    for (var i = 0; i < splits.length; i++) {
      if (vals[i] == null || vals[i] === "") continue;
      var text = String(vals[i]).split("\n")[0], w = u.ctx.measureText(text).width / devicePixelRatio, x = u.valToPos(splits[i], "x");
      boxes.push({left: x - w / 2, right: x + w / 2, text: text});
    }
    for (var j = 1; j < boxes.length; j++)
      if (boxes[j].left < boxes[j - 1].right + 3) out.push(id + ": " + boxes[j - 1].text + " and " + boxes[j].text + " are " + Math.round(boxes[j].left - boxes[j - 1].right) + " px apart");
  });
  return out;
})()`

// inTimezoneAt11 makes the page's local time 11 o'clock (a fixed-offset
// zone for the hour of day now), so that the time axis's labels are as
// long as they get: "11:23am".
func inTimezoneAt11() chromedp.Action[chromedp.Void] {
	zone := fmt.Sprintf("Etc/GMT%+d", time.Now().UTC().Hour()-11) // Etc/GMT+3 is UTC-3
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return err
	})
}

// TestDashboardBigNumbersReadable loads the same busy server and checks
// that the charts' y axes are wide enough for labels in the millions, that
// their time labels at 11 o'clock do not run into one another, that
// the newest step's misses bar is drawn, and
// that the misses card, when none of the misses could be explained (all
// were lookups by key), says why instead of "No misses recorded" beside a
// card counting 527,060 misses.
func TestDashboardBigNumbersReadable(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	seedLongLabels(t, srv)
	if err := chromedp.Do(ctx,
		inTimezoneAt11(),
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", "1,756,910"),
		chromedp.Poll[chromedp.Void](`!!window.cachesvcDashboard.charts["chart-lookups"]`, chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	for _, w := range []int64{800, 1024, 1400, 2560} {
		screenshot(t, ctx, fmt.Sprintf("dashboard-big-%d.png", w), w, 900)
		for _, js := range []string{axisFitJS, timeLabelsJS} {
			bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Errorf("at %d px: %s", w, b)
			}
		}
	}
	// Every lookup is in the newest step: its misses bar (the right-hand
	// one, in the misses colour) is drawn, not left past the plot's edge.
	if red, err := chromedp.Run(ctx, chromedp.Evaluate[int](colourPixelsJS("chart-lookups", 0xff, 0x6b, 0x6b))); err != nil || red < 50 {
		t.Errorf("the lookups chart has %d pixels of the misses' colour (%v): the newest step's misses bar is not drawn", red, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({store: document.getElementById("store-chart-title").textContent,
		storeSub: document.getElementById("kpi-store-sub").textContent, reasons: document.getElementById("reasons").textContent,
		recent: document.getElementById("recent-misses").textContent, misses: document.getElementById("kpi-misses").textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if got["misses"] != "527,060" || !strings.Contains(got["reasons"], "None of the 527,060 misses is explained: they were lookups by key") ||
		strings.Contains(got["recent"], "No misses recorded") {
		t.Errorf("misses card beside %s misses: by reason %q, recent %q; want why none is explained", got["misses"], got["reasons"], got["recent"])
	}
	// The store has no size limit: the chart has no limit line, and its
	// title does not promise one.
	if !strings.Contains(got["storeSub"], "no size limit") || got["store"] != "Store size" {
		t.Errorf("store chart title = %q beside %q, want \"Store size\"", got["store"], got["storeSub"])
	}
}

// colourPixelsJS counts the pixels of chart id's canvas drawn in colour
// rgb (within a few levels, bars being drawn at 80% opacity on the card).
func colourPixelsJS(id string, r, g, b int) string {
	return fmt.Sprintf(`(function(){
  var c = document.querySelector("#%s canvas"), d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, n = 0;
  for (var i = 0; i < d.length; i += 4) if (Math.abs(d[i] - %d) < 24 && Math.abs(d[i+1] - %d) < 24 && Math.abs(d[i+2] - %d) < 24) n++;
  return n;
})()`, id, r, g, b)
}
