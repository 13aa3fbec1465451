package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// startWithStats starts a test server with persisted stats.
func startWithStats(t *testing.T) *statstest.Server {
	t.Helper()
	return statstest.Start(t, nil)
}

func getStats(t *testing.T, url string) wire.StatsResponse {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	var r wire.StatsResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return r
}

// TestSeededStatsExactAcrossRestart seeds 1,000 lookups (750 hits) across two
// namespaces and two runs over HTTP and checks the exact numbers in
// /v1/stats, /v1/{ns}/stats, /metrics and `cachesvc stats` output, before and
// after a real server restart.
func TestSeededStatsExactAcrossRestart(t *testing.T) {
	srv := startWithStats(t)
	statstest.Seed(t, srv.URL)

	check := func(when string) {
		r := getStats(t, srv.URL+"/v1/stats?since=1h&step=1m")
		tot := r.Totals
		if tot.Lookups != statstest.Lookups || tot.Hits != statstest.Hits || tot.Misses != statstest.Misses ||
			tot.HitRate != 0.75 || tot.CompileSecondsSaved != statstest.SavedSeconds || tot.Writes != statstest.Writes ||
			tot.BytesIn != statstest.Writes*statstest.EntryBytes || tot.BytesOut != statstest.Hits*statstest.EntryBytes {
			t.Fatalf("%s: totals = %+v", when, tot)
		}
		if r.Server.Version == "" || r.Store.Entries != statstest.Writes {
			t.Fatalf("%s: server %+v store %+v", when, r.Server, r.Store)
		}
		if len(r.Namespaces) != 2 {
			t.Fatalf("%s: namespaces = %+v", when, r.Namespaces)
		}
		for i, n := range r.Namespaces {
			if n.Namespace != statstest.NS[i] || n.Lookups != statstest.NSLookups || n.Hits != statstest.NSHits ||
				n.CompileSecondsSaved != statstest.NSHits*statstest.CompileSeconds[i] || len(n.Backends) != 1 || n.Backends[0].Backend != "xla" {
				t.Fatalf("%s: namespace %d = %+v", when, i, n)
			}
		}
		runs := map[string]stats.RunTotals{}
		for _, run := range r.Runs {
			runs[run.Run] = run
		}
		if r1, r2 := runs["sweep-1"], runs["sweep-2"]; len(runs) != 2 ||
			r1.Lookups != 500 || r1.Hits != statstest.Run1Hits || r1.CompileSecondsSaved != statstest.Run1Saved ||
			r2.Lookups != 500 || r2.Hits != statstest.Run2Hits || r2.CompileSecondsSaved != statstest.Run2Saved || r2.HitRate != 0.5 {
			t.Fatalf("%s: runs = %+v", when, r.Runs)
		}
		if len(r.TopEntries) != 10 || r.TopEntries[0].Namespace != "team-b" || r.TopEntries[0].Name == "" {
			t.Fatalf("%s: top entries = %+v", when, r.TopEntries)
		}
		var sl, sh int64
		var ss float64
		for i := range r.Series.Time {
			sl += r.Series.Total.Lookups[i]
			sh += r.Series.Total.Hits[i]
			ss += r.Series.Total.SecondsSaved[i]
		}
		if sl != statstest.Lookups || sh != statstest.Hits || ss != statstest.SavedSeconds || len(r.Series.Namespaces) != 2 {
			t.Fatalf("%s: series sums lookups %d hits %d saved %v", when, sl, sh, ss)
		}

		ns := getStats(t, srv.URL+"/v1/team-b/stats")
		if ns.Totals.Lookups != 500 || ns.Totals.Hits != 375 || ns.Totals.CompileSecondsSaved != 1500 || ns.Series == nil || len(ns.Namespaces) != 1 {
			t.Fatalf("%s: team-b = %+v", when, ns.Totals)
		}

		for series, want := range map[string]float64{
			`cachesvc_lookups_total{backend="xla",namespace="team-a",result="hit"}`:         375,
			`cachesvc_lookups_total{backend="xla",namespace="team-a",result="miss"}`:        125,
			`cachesvc_lookups_total{backend="xla",namespace="team-b",result="hit"}`:         375,
			`cachesvc_lookups_total{backend="xla",namespace="team-b",result="miss"}`:        125,
			`cachesvc_compile_seconds_saved_total{backend="xla",namespace="team-a"}`:        937.5,
			`cachesvc_compile_seconds_saved_total{backend="xla",namespace="team-b"}`:        1500,
			`cachesvc_entries_stored_total{backend="xla",namespace="team-a"}`:               5,
			`cachesvc_lookup_bytes_total{backend="xla",direction="out",namespace="team-b"}`: 375 * statstest.EntryBytes,
			`cachesvc_leases_held`: 0,
		} {
			if got := srv.Metric(series); got != want {
				t.Errorf("%s: %s = %v, want %v", when, series, got, want)
			}
		}

		var out strings.Builder
		if err := report.Render(&out, &r, report.Options{Server: srv.URL}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1,000", "hits 750, misses 250", "75.0%", "2,437.5 s", "sweep-1", "sweep-2", "50.0%", "team-a", "team-b"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: cachesvc stats output lacks %q:\n%s", when, want, out.String())
			}
		}
	}
	check("before restart")
	srv.Restart()
	check("after restart")
}

func TestStatsBadInput(t *testing.T) {
	srv := startWithStats(t)
	for _, tt := range []struct {
		url    string
		status int
		code   string
		msg    string // what the message must contain; "" for any
	}{
		{"/v1/stats?since=yesterday", 400, "bad_since", ""},
		{"/v1/stats?since=2099-01-01T00:00:00Z", 400, "bad_since", ""},
		{"/v1/stats?since=-5h", 400, "bad_since", `since="-5h" is a negative duration: give how far back from now as a positive one (5h)`},
		{"/v1/team-a/stats?since=-90m", 400, "bad_since", "negative duration"},
		// A number without a unit is Unix seconds: negative, or before any
		// statistics, it is most likely a duration missing its unit.
		{"/v1/stats?since=-5", 400, "bad_since", `since="-5" is a negative Unix time (before 1970): a number without a unit is Unix seconds; for a duration back from now give a positive one with its unit (5s, 5m or 5h)`},
		{"/v1/team-a/stats?since=-5", 400, "bad_since", "negative Unix time"},
		{"/v1/stats?since=-9223372036854775808", 400, "bad_since", "negative Unix time"},
		{"/v1/stats?since=5", 400, "bad_since", `since="5" is 1970-01-01T00:00:05Z, before 2000, long before any statistics were kept: a number without a unit is Unix seconds; for a duration back from now give its unit (5s, 5m or 5h)`},
		{"/v1/stats?since=1999-12-31T23:59:59Z", 400, "bad_since", "before 2000"},
		{"/v1/stats?since=0001-01-01T00:00:00Z", 400, "bad_since", "before 2000"},
		{"/v1/stats?since=abc", 400, "bad_since", `since="abc" is not a time`},
		{"/v1/stats?since=2562047h", 400, "bad_since", "before 2000"},
		{"/v1/stats?since=1h&step=-5m", 400, "bad_step", ""},
		{"/v1/Bad_NS/stats", 400, "bad_namespace", ""},
		{"/v1/team-a/misses?limit=0", 400, "bad_limit", ""},
	} {
		resp, err := http.Get(srv.URL + tt.url)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		body := apitest.ReadAll(t, resp)
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tt.status || e.Error.Code != tt.code || e.Error.Message == "" || !strings.Contains(e.Error.Message, tt.msg) {
			t.Errorf("GET %s: %d %s, want %d %s", tt.url, resp.StatusCode, body, tt.status, tt.code)
		}
	}
}

// TestStatsSinceForms: each form of ?since= that names a recent time is
// answered with a series, the dashboard's Unix seconds included.
func TestStatsSinceForms(t *testing.T) {
	srv := startWithStats(t)
	hourAgo := time.Now().Add(-time.Hour)
	for _, since := range []string{"6h", strconv.FormatInt(hourAgo.Unix(), 10), hourAgo.UTC().Format(time.RFC3339)} {
		if r := getStats(t, srv.URL+"/v1/stats?since="+url.QueryEscape(since)); r.Series == nil {
			t.Errorf("since=%s: no series", since)
		}
	}
}

func TestEmptyStatsAndDashboardAssets(t *testing.T) {
	srv := startWithStats(t)
	r := getStats(t, srv.URL+"/v1/stats")
	if r.Totals.Lookups != 0 || r.Namespaces == nil || r.Runs == nil || r.RecentMisses == nil || r.Series != nil {
		t.Fatalf("empty stats = %+v", r)
	}
	var out strings.Builder
	if err := report.Render(&out, &r, report.Options{Server: srv.URL}); err != nil || !strings.Contains(out.String(), "The cache is empty") {
		t.Fatalf("empty report: %v\n%s", err, out.String())
	}
	for path, ctype := range map[string]string{
		"/":                                "text/html",
		"/assets/app.js":                   "text/javascript",
		"/assets/style.css":                "text/css",
		"/assets/vendor/uPlot.iife.min.js": "text/javascript",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body := apitest.ReadAll(t, resp)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/assets/nope.js", "/assets/../web.go", "/assets/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		apitest.ReadAll(t, resp)
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// TestStatsAnswerSaysItsFormat: every stats answer names its format version
// and whose store usage it carries, so that a CLI of another version reads
// it as meant (stats/report TestRenderAnswersOfOtherVersions).
func TestStatsAnswerSaysItsFormat(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	tests := []struct{ path, scope string }{
		{"/v1/stats", wire.StoreScopeServer},
		{"/v1/default/stats", wire.StoreScopeNamespace},
	}
	for _, tt := range tests {
		r := getStats(t, srv.URL+tt.path)
		if r.Format != wire.StatsFormat || r.StoreScope != tt.scope {
			t.Errorf("%s: format %d, store_scope %q; want %d %q", tt.path, r.Format, r.StoreScope, wire.StatsFormat, tt.scope)
		}
	}
}
