package web_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/wire"
)

// TestDashboardShowsFleet serves the dashboard of a replica whose fleet is
// real: two replicas' heartbeats in a bucket of a real S3 server (versitygw)
// are read back by the registry the server asks. The fleet card lists both
// replicas with their health and the fleet's totals, and a screenshot is
// saved.
func TestDashboardShowsFleet(t *testing.T) {
	ctx := browser(t)
	srv3 := s3test.Start(t)
	bucket := srv3.NewBucket(t)
	b, err := registry.Dial(s3.Config{Endpoint: srv3.Endpoint, Bucket: bucket, Prefix: "fleet/", Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	var regs []*registry.Registry
	for i, id := range []string{"replica-a", "replica-b"} {
		n := int64(100 * (i + 1))
		r, err := registry.New(registry.Config{Bucket: b, ID: id, Version: "test", URL: "http://" + id + ":8080",
			Sample: func() registry.Sample {
				return registry.Sample{Hot: wire.StoreUsage{Entries: n, Bytes: n << 20},
					Shared: wire.SharedTierState{Configured: true, Reachable: true},
					Stats:  &wire.Snapshot{Totals: wire.Totals{Lookups: 2 * n, Hits: n, HitRate: 0.5, CompileSecondsSaved: 3600}},
					// The replicas disagree on --max-entry-size only.
					Config: &wire.ReplicaConfig{MaxEntrySize: n << 20, Plugins: []string{"xla@1 sha256:aaaaaaaaaaaa"}}}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Publish(context.Background()); err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	var sharedDown atomic.Bool
	srv := statstest.StartWith(t, nil, func(c *api.Config) {
		c.Fleet = regs[0]
		c.SharedTier = func() wire.SharedTierState {
			if sharedDown.Load() {
				return wire.SharedTierState{Configured: true, LastError: "connection refused"}
			}
			return wire.SharedTierState{Configured: true, Reachable: true}
		}
	})
	statstest.Seed(t, srv.URL)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		waitText("#fleet-table tbody", "replica-b"),
		waitText("#fleet-summary", "2 of 2 replicas healthy"),
		waitText("#fleet-mismatches", "Replicas disagree on max_entry_size"),
	); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	warn, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		items: document.querySelectorAll("#fleet-mismatches li").length,
		text: document.getElementById("fleet-mismatches").textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if warn["items"] != float64(1) || !strings.Contains(warn["text"].(string), "100 MiB: replica-a") || !strings.Contains(warn["text"].(string), "200 MiB: replica-b") {
		t.Errorf("fleet warnings = %v: want one, naming each replica's max_entry_size", warn)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(function(){
		function row(s){var e=document.querySelector(s);return e?Array.prototype.map.call(e.cells,function(c){return c.textContent.trim();}).join("|"):null;}
		return {a: row('#fleet-table tr[data-replica="replica-a"]'), b: row('#fleet-table tr[data-replica="replica-b"]'),
			summary: document.getElementById("fleet-summary").textContent};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"a":       "replica-a|ok|",
		"b":       "replica-b|ok|",
		"summary": "fleet: 300 of 600 lookups hit, 2.0 h saved",
	} {
		if g := got[k]; !strings.Contains(g, want) {
			t.Errorf("%s = %q, want it to contain %q", k, g, want)
		}
	}
	if !strings.Contains(got["b"], "200 MiB · 200") || !strings.Contains(got["b"], "reachable") {
		t.Errorf("replica-b row = %q: want its hot tier and shared tier", got["b"])
	}
	checkLayout(t, ctx, "dashboard-fleet.png", 1366, 900)
	checkLayout(t, ctx, "dashboard-fleet-2560.png", 2560, 1440)
	checkLayout(t, ctx, "dashboard-fleet-800.png", 800, 900)

	// The shared tier goes down: the fleet's view cannot be read (503
	// fleet_unavailable), but this replica's own numbers still show, and
	// the fleet card says why the replicas are not listed.
	srv3.Stop()
	sharedDown.Store(true)
	if err := chromedp.Do(ctx,
		waitText("#fleet-summary", "fleet view unavailable"),
		waitText("#fleet-table tbody", "Cannot read the replicas' heartbeats"),
	); err != nil {
		t.Fatalf("dashboard during the outage: %v", err)
	}
	down, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({
		banner: document.getElementById("error-banner").hidden,
		summary: document.getElementById("fleet-summary").textContent,
		lookups: document.getElementById("kpi-lookups").textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if down["banner"] != true || !strings.Contains(down["summary"].(string), "unreachable") || down["lookups"] == "" || down["lookups"] == "0" {
		t.Errorf("dashboard during the outage = %v: want no error banner, the shared tier unreachable, this replica's lookups", down)
	}

	// Back: the replicas are listed again.
	srv3.Restart(t)
	sharedDown.Store(false)
	if err := chromedp.Do(ctx, waitText("#fleet-summary", "2 of 2 replicas")); err != nil {
		t.Fatalf("dashboard after the outage: %v", err)
	}
}
