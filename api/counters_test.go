package api_test

import (
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestCountersExportEverySeriesFromTheStart checks that counters whose
// label takes a fixed set of values export each series at 0 before its
// first event: a series that appears with the value 1 shows no increase,
// so an alert on increase(cachesvc_namespaces_reloads_total{result="failed"})
// or on puts refused as full would miss the first one.
func TestCountersExportEverySeriesFromTheStart(t *testing.T) {
	pm, reloads := api.NewPluginMetrics(), api.NewNamespacesReloads()
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Registry.MustRegister(pm, reloads) }})
	for _, series := range []string{
		`cachesvc_puts_total{result="created"}`,
		`cachesvc_puts_total{result="full"}`,
		`cachesvc_puts_total{result="quota_exceeded"}`,
		`cachesvc_puts_total{result="error"}`,
		`cachesvc_namespaces_reloads_total{result="failed"}`,
		`cachesvc_plugin_reloads_total{result="failed"}`,
		`cachesvc_entry_reports_total{result="quarantined"}`,
		`cachesvc_auth_failures_total{reason="unauthenticated"}`,
		`cachesvc_auth_failures_total{reason="forbidden"}`,
		`cachesvc_limited_total{limit="rate"}`,
		`cachesvc_limited_total{limit="uploads"}`,
		`cachesvc_signature_digest_requests_total{outcome="unknown"}`,
	} {
		if v := srv.Metric(series); v != 0 {
			t.Errorf("%s = %v at start, want 0 (-1: not exported)", series, v)
		}
	}
}
