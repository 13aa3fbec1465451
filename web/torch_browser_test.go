package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// pt2Signature is what cachesvc.torch sends for one FX graph: torch's
// Redis-form key and the components it names on a miss.
func pt2Signature(key, graph string) []byte {
	b, _ := json.Marshal(map[string]string{"backend": "pt2", "key": "pt2:fx-graph-v1::" + key + ":c1", "name": "forward",
		"torch_version": "2.15.0", "device": "cpu", "inductor_config": "c0ffee", "graph": graph})
	return b
}

// TestDashboardShowsTorchBesideXLA serves the dashboard of a real server
// with the built-in plugins, after JAX traffic (xla entries by key) and
// torch traffic through the pt2 plugin (a miss, its write with torch's
// compile time, a hit, and the miss of a changed graph). The namespace
// table lists both backends with their own numbers, the miss names the FX
// graph, and `cachesvc stats` prints the same rows.
func TestDashboardShowsTorchBesideXLA(t *testing.T) {
	ctx := browser(t)
	keyer := keyingtest.Keyer(t, plugins.Config{PoolSize: 1}, keying.Config{})
	srv := statstest.StartWith(t, nil, func(c *api.Config) { c.Keyer = keyer })
	call := caller(t, srv.URL)
	xlaKey := strings.Repeat("ab", 32)
	call(http.MethodPut, "/v1/default/entries/"+xlaKey, []byte("xla executable"), http.StatusCreated,
		"X-Cachesvc-Backend", "xla", "X-Compile-Seconds", "40", "X-Cachesvc-Name", "jit_train_step")
	for i := 0; i < 3; i++ {
		call(http.MethodGet, "/v1/default/entries/"+xlaKey, nil, http.StatusOK)
	}
	miss := call(http.MethodPost, "/v1/default/lookup", pt2Signature("fk5sgraphone", "aaaa"), http.StatusNotFound)
	pt2Key := miss.Header.Get(wire.HeaderKey)
	call(http.MethodPut, "/v1/default/entries/"+pt2Key, []byte(`{"time_taken_ms": 18600}`), http.StatusCreated, "X-Compile-Seconds", "18.6")
	call(http.MethodPost, "/v1/default/lookup", pt2Signature("fk5sgraphone", "aaaa"), http.StatusOK)
	call(http.MethodPost, "/v1/default/lookup", pt2Signature("fk5sgraphtwo", "bbbb"), http.StatusNotFound)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#kpi-lookups", "6"),
		waitText("#recent-misses", "FX graph"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		function row(s){var e=document.querySelector(s);return e?Array.prototype.map.call(e.cells,function(c){return c.textContent.trim();}).join("|"):null;}
		return {
			ns: row('#ns-table tr.ns-row[data-ns="default"]'),
			xla: row('#ns-table tr.sub[data-backend="xla"]'), pt2: row('#ns-table tr.sub[data-backend="pt2"]'),
			recent: document.querySelector("#recent-misses").textContent,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for k, subs := range map[string][]string{
		"ns":     {"all (2)", "6|4|2"},
		"xla":    {"xla", "3|3|0", "100.0%"},
		"pt2":    {"pt2", "3|1|2", "33.3%"},
		"recent": {"forward", "FX graph differs from the nearest entry"},
	} {
		for _, sub := range subs {
			if !strings.Contains(got[k], sub) {
				t.Errorf("%s = %q, want it to contain %q", k, got[k], sub)
			}
		}
	}
	checkLayout(t, ctx, "dashboard-torch.png", 1366, 900)
	checkLayout(t, ctx, "dashboard-torch-800.png", 800, 900)

	st, err := report.Fetch(t.Context(), http.DefaultClient, srv.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report.Render(&out, st, report.Options{Server: srv.URL}); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"default    pt2      3        1     2       33.3%", "default    xla      3        3     0       100.0%"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("cachesvc stats lacks %q:\n%s", row, out.String())
		}
	}
}
