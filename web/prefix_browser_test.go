package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/stats/statstest"
)

// prefixProxy is a reverse proxy that serves backend under /cachesvc/
// (stripping the prefix, as nginx's "location /cachesvc/ { proxy_pass
// http://backend/; }" does) beside another service at every other path,
// and records the paths that reached that other service.
type prefixProxy struct {
	*httptest.Server
	mu     sync.Mutex
	astray []string
}

func startPrefixProxy(t *testing.T, backend string) *prefixProxy {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	p := &prefixProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	mux := http.NewServeMux()
	mux.Handle("/cachesvc/", http.StripPrefix("/cachesvc", rp))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.astray = append(p.astray, r.URL.Path)
		p.mu.Unlock()
		http.Error(w, "another service", http.StatusNotFound)
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *prefixProxy) strays() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.astray...)
}

// TestDashboardUnderPathPrefix: a platform team serves cachesvc at
// https://host/cachesvc/ beside other services. The page's scripts,
// styles and statistics must come from under the prefix (absolute paths
// such as /assets/app.js and /v1/stats went to the other service, and the
// page stayed empty), and the address it tells trainers to use must
// include the prefix.
func TestDashboardUnderPathPrefix(t *testing.T) {
	ctx := browser(t)
	srv := statstest.Start(t, nil)
	proxy := startPrefixProxy(t, srv.URL)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(proxy.URL+"/cachesvc/"),
		waitText("#live-text", "live"),
	); err != nil {
		t.Fatalf("dashboard under /cachesvc/: %v (requests that left the prefix: %v)", err, proxy.strays())
	}
	statstest.Seed(t, srv.URL)
	if err := chromedp.Do(ctx, waitText("#kpi-lookups", "1,000")); err != nil {
		t.Fatalf("live refresh under the prefix: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		url: document.querySelector(".server-url").textContent,
		stats: document.querySelector('a[href$="v1/stats"]').href,
		charts: !!document.querySelector("#chart-hit-rate .uplot canvas"),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if want := proxy.URL + "/cachesvc"; got["url"] != want {
		t.Errorf("the page tells trainers to use %v, want %s", got["url"], want)
	}
	if want := proxy.URL + "/cachesvc/v1/stats"; got["stats"] != want {
		t.Errorf("the footer's JSON link is %v, want %s", got["stats"], want)
	}
	if got["charts"] != true {
		t.Error("no chart drawn: uPlot did not load")
	}
	if s := proxy.strays(); len(s) > 0 {
		t.Errorf("the page requested %v outside its prefix", strings.Join(s, ", "))
	}
}
