package report

import (
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// TestRenderSharedTierAge: a fleet replica's shared-tier count is its last
// listing of the bucket plus its own writes since, so the line says how
// old that listing is (store.listed_at), as the dashboard's store card
// does; before the first listing it says the tier is not counted yet, and
// an older server's answer without listed_at shows no age. How often the
// replica lists the bucket is the server's (store.list_interval_s): it
// was printed as "every 10 minutes" whatever it was, and is left out when
// the server does not say.
func TestRenderSharedTierAge(t *testing.T) {
	now := time.Date(2026, 12, 4, 23, 30, 0, 0, time.UTC)
	tests := []struct {
		name      string
		listedAt  time.Time
		every     float64 // store.list_interval_s
		uncounted string
		want      string
		not       []string
	}{
		{"listed minutes ago", now.Add(-3*time.Minute - 20*time.Second), 600, "",
			"Shared tier 5.0 MiB in 5 entries (no limit), the fleet's as this replica listed it 3 min ago, plus its own writes since (it lists the bucket every 10 minutes); 0 integrity failures\n",
			[]string{"not counted", "not yet listed"}},
		{"listed just now", now.Add(-time.Second), 600, "",
			"as this replica listed it just now, plus its own writes since", nil},
		{"listed seconds ago", now.Add(-42 * time.Second), 600, "",
			"as this replica listed it 42 s ago, plus its own writes since", nil},
		{"listed, every 30 seconds", now.Add(-42 * time.Second), 30, "",
			"as this replica listed it 42 s ago, plus its own writes since (it lists the bucket every 30 seconds);", []string{"10 minutes"}},
		{"listed, every hour", now.Add(-42 * time.Minute), 3600, "",
			"as this replica listed it 42 min ago, plus its own writes since (it lists the bucket every hour);", []string{"10 minutes"}},
		{"listed, interval not given", now.Add(-42 * time.Second), 0, "",
			"as this replica listed it 42 s ago, plus its own writes since; 0 integrity failures", []string{"10 minutes"}},
		{"not yet listed", time.Time{}, 600, "first listing of the bucket pending",
			"Shared tier: not yet listed by this replica, not counted yet (first listing of the bucket pending); 0 integrity failures\n",
			[]string{"5.0 MiB", " ago"}},
		{"older server without listed_at", time.Time{}, 0, "",
			"Shared tier 5.0 MiB in 5 entries (no limit), the fleet's as this replica last counted them (its last listing of the bucket, plus its own writes since)",
			[]string{" ago", "not yet listed", "10 minutes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &wire.StatsResponse{Format: 4, SharedTier: &wire.SharedTierState{Configured: true, Reachable: true}}
			r.Totals = wire.Totals{Lookups: 2, Hits: 1, Misses: 1, Writes: 1}
			r.Store = wire.StoreUsage{Tier: wire.StoreTierShared, Entries: 5, Bytes: 5 << 20, ListedAt: tt.listedAt, ListInterval: tt.every, Uncounted: tt.uncounted,
				Hot: &wire.StoreUsage{Tier: wire.StoreTierHot, Entries: 3, Bytes: 3 << 20, MaxBytes: 3 << 20}}
			var out strings.Builder
			if err := Render(&out, r, Options{Server: "http://h:8080", Now: now}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
			for _, n := range tt.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}
