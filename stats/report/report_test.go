package report

import (
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// TestRenderSummary: counts agree with their nouns, a time under two
// minutes is not repeated in seconds, and with a namespace the store line
// is that namespace's (when the server reports it) or says it is the
// whole server's.
func TestRenderSummary(t *testing.T) {
	one := wire.Totals{Lookups: 1, Hits: 1, HitRate: 1, CompileSecondsSaved: 20, Writes: 1, BytesIn: 10, BytesOut: 10}
	many := wire.Totals{Lookups: 4, Hits: 3, Misses: 1, HitRate: 0.75, CompileSecondsSaved: 1500, Writes: 2}
	store := wire.StoreUsage{Entries: 1, Bytes: 2048, Evictions: 1, IntegrityFailures: 1}
	withNS := store
	withNS.Entries, withNS.Namespaces = 3, []wire.NamespaceUsage{{Namespace: "team-a", Entries: 1, Bytes: 1024, MaxBytes: 4096, MaxEntries: 10, Evictions: 2}}
	tests := []struct {
		name    string
		totals  wire.Totals
		store   wire.StoreUsage
		ns      string
		want    []string
		notWant []string
	}{
		{"singular", one, store, "", []string{
			"Time saved  20 s of compiling\n",
			"10 B stored in 1 write\n",
			"Store       2.0 KiB in 1 entry (no limit); 1 eviction, 1 integrity failure\n"}, []string{"(20 s)", "writes", "entries"}},
		{"plural", many, withNS, "", []string{
			"Time saved  25.0 min (1,500 s) of compiling\n",
			"in 2 writes\n",
			"Store       2.0 KiB in 3 entries (no limit)"}, []string{"team-a", "compile lease"}},
		{"evictions after a restart", wire.Totals{Lookups: 1, Evictions: 16}, wire.StoreUsage{Entries: 4, Bytes: 2048}, "", []string{
			"Store       2.0 KiB in 4 entries (no limit); 16 evictions, 0 integrity failures\n"}, nil},
		{"lease waits", wire.Totals{Lookups: 7, Hits: 3, Misses: 4, WaitHits: 3}, store, "", []string{
			"Lookups     7  (hits 3, misses 4; 3 hits after waiting on a compile lease)\n"}, nil},
		{"namespace usage", many, withNS, "team-a", []string{
			// No whole-server line: it would tell a reader of team-a
			// about other namespaces' contents (the server leaves it out
			// of a namespace's answer, too).
			"Store       1.0 KiB in 1 entry (quota 4.0 KiB, 25% used; at most 10 entries); 2 evictions, 0 expirations\n"}, []string{"Server "}},
		{"namespace without usage", many, store, "team-b", []string{
			"Store       2.0 KiB in 1 entry (no limit); 1 eviction, 1 integrity failure (whole server: it reports no per-namespace usage)\n"}, []string{"Server "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			r := &wire.StatsResponse{Store: tc.store}
			r.Totals = tc.totals
			if err := Render(&out, r, Options{Server: "http://h:8080", Namespace: tc.ns}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestRenderCutsLongEntryNames: an entry named by its JAX key (70
// characters) is cut in the top entries table, so that the table fits a
// terminal; the KEY column still tells entries apart.
func TestRenderCutsLongEntryNames(t *testing.T) {
	jaxKey := "jit_train_step-" + strings.Repeat("0a", 32)
	r := &wire.StatsResponse{}
	r.Totals = wire.Totals{Lookups: 2, Hits: 2, HitRate: 1}
	r.TopEntries = []wire.TopEntry{
		{Key: strings.Repeat("ab", 32), Name: jaxKey, Namespace: "team-a", CompileSeconds: 5, Hits: 1, SecondsSaved: 5},
		{Key: strings.Repeat("cd", 32), Name: "jit_step", Namespace: "team-a", CompileSeconds: 5, Hits: 1, SecondsSaved: 5},
	}
	var out strings.Builder
	if err := Render(&out, r, Options{Server: "http://h:8080"}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "jit_") && len([]rune(line)) > 100 {
			t.Errorf("top entries line is %d characters wide: %q", len([]rune(line)), line)
		}
	}
	if want := jaxKey[:39] + "…  abababababab"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 entries"}, {1, "1 entry"}, {2, "2 entries"}, {1000, "1,000 entries"}} {
		if got := Plural(tc.n, "entry", "entries"); got != tc.want {
			t.Errorf("Plural(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestRenderFleet: with the fleet's view the totals are the fleet's and
// every replica is listed with the version it runs (README: a rolling
// upgrade is watched there as on the Fleet card); a replica's own view says
// that it is one.
func TestRenderFleet(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &wire.StatsResponse{SharedTier: &wire.SharedTierState{Configured: true, Reachable: true}}
	r.Totals = wire.Totals{Lookups: 5, Hits: 5, HitRate: 1, Writes: 1}
	var out strings.Builder
	if err := Render(&out, r, Options{Server: "http://h:8080", Now: now}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Replica     one replica of a fleet (shared tier reachable): these are its numbers") {
		t.Errorf("a replica's view does not say so:\n%s", out.String())
	}

	r.Fleet = &wire.FleetStats{Healthy: 1, Replicas: []wire.ReplicaStatus{
		{ID: "a", Version: "v1.2.3", Health: wire.HealthOK, Heartbeat: now.Add(-3 * time.Second), Hot: wire.StoreUsage{Entries: 2, Bytes: 2048},
			Shared: wire.SharedTierState{Configured: true, Reachable: true}, Totals: wire.Totals{Lookups: 5, Hits: 5, HitRate: 1}},
		{ID: "b", Version: "dev", Health: wire.HealthStale, Heartbeat: now.Add(-time.Minute), Shared: wire.SharedTierState{Configured: true, QueueDepth: 7},
			Totals: wire.Totals{Lookups: 3, Misses: 3}},
	}}
	r.Fleet.Totals.Totals = wire.Totals{Lookups: 8, Hits: 5, Misses: 3, HitRate: 0.625, Writes: 4}
	out.Reset()
	if err := Render(&out, r, Options{Server: "http://h:8080", Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"cachesvc stats · http://h:8080 · all namespaces · fleet of 2 replicas\n",
		"Lookups     8  (hits 5, misses 3)\n",
		"stored in 4 writes\n",
		"Replicas    1 of 2 healthy\n",
		"REPLICA  HEALTH  HEARTBEAT  VERSION  HOT TIER              SHARED TIER  QUEUED  LOOKUPS  HIT RATE\n",
		"a        ok      just now   v1.2.3   2.0 KiB in 2 entries  reachable    0       5        100.0%\n",
		"b        stale   60 s ago   dev      0 B in 0 entries      unreachable  7       3        0.0%\n",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "one replica of a fleet") {
		t.Errorf("the fleet's view calls itself one replica's:\n%s", out.String())
	}
}

// TestRenderFleetConfigMismatches: replicas of one fleet that disagree on a
// setting that must agree get a warning per setting, naming each value
// (sizes readable) with its replicas and what to do; agreeing ones none.
func TestRenderFleetConfigMismatches(t *testing.T) {
	tests := []struct {
		name       string
		mismatches []wire.ConfigMismatch
		want       []string
	}{
		{"agree", nil, nil},
		{"max entry size and plugins", []wire.ConfigMismatch{
			{Setting: "max_entry_size", Values: []wire.ConfigValue{{Value: "4294967296", Replicas: []string{"a", "c"}}, {Value: "1048576", Replicas: []string{"b"}}}},
			{Setting: "plugins", Values: []wire.ConfigValue{{Value: "xla@1 sha256:aaaaaaaaaaaa", Replicas: []string{"a", "b"}}, {Value: "xla@2 sha256:bbbbbbbbbbbb", Replicas: []string{"c"}}}},
		}, []string{
			"WARNING     replicas disagree on max_entry_size: an upload one replica refuses (413) another stores; give every replica the same --max-entry-size\n",
			"              4.0 GiB: a, c\n",
			"              1.0 MiB: b\n",
			"WARNING     replicas disagree on plugins: one signature gets different keys",
			"              xla@2 sha256:bbbbbbbbbbbb: c\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &wire.StatsResponse{SharedTier: &wire.SharedTierState{Configured: true, Reachable: true}}
			r.Fleet = &wire.FleetStats{Healthy: 3, ConfigMismatches: tt.mismatches}
			var out strings.Builder
			if err := Render(&out, r, Options{Server: "http://h:8080", Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.want == nil && strings.Contains(out.String(), "WARNING") {
				t.Errorf("agreeing replicas warned:\n%s", out.String())
			}
		})
	}
}
