package stats

import (
	"math"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

func TestMergeSnapshots(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tot := func(lookups, hits int64, saved float64) Totals {
		return Totals{Lookups: lookups, Hits: hits, Misses: lookups - hits, CompileSecondsSaved: saved}
	}
	a := Snapshot{
		Totals: tot(10, 5, 50),
		Namespaces: []NamespaceTotals{{Namespace: "team-a", Totals: tot(10, 5, 50), Backends: []BackendTotals{
			{Backend: "xla", Totals: tot(8, 4, 40)}, {Backend: "passthrough", Totals: tot(2, 1, 10)}}}},
		Backends:    []BackendTotals{{Backend: "xla", Totals: tot(8, 4, 40)}, {Backend: "passthrough", Totals: tot(2, 1, 10)}},
		Runs:        []RunTotals{{Run: "sweep-1", Namespaces: []string{"team-a"}, FirstSeen: t0, LastSeen: t0.Add(time.Hour), Totals: tot(10, 5, 50)}},
		TopEntries:  []TopEntry{{Namespace: "team-a", Key: "aa", Backend: "xla", Hits: 4, SecondsSaved: 40, LastHit: t0}},
		MissReasons: []ReasonCount{{Reason: "flags", Label: "XLA flags differ", Count: 3}},
		StoreCounters: wire.Global{
			Evictions: 1, StoreBytes: 100, StoreEntries: 2, MaxBytes: 1000,
		},
	}
	b := Snapshot{
		Totals: tot(30, 30, 300),
		Namespaces: []NamespaceTotals{
			{Namespace: "team-a", Totals: tot(20, 20, 200), Backends: []BackendTotals{{Backend: "xla", Totals: tot(20, 20, 200)}}},
			{Namespace: "team-b", Totals: tot(10, 10, 100), Backends: []BackendTotals{{Backend: "xla", Totals: tot(10, 10, 100)}}},
		},
		Backends: []BackendTotals{{Backend: "xla", Totals: tot(30, 30, 300)}},
		Runs: []RunTotals{
			{Run: "sweep-1", Namespaces: []string{"team-b"}, FirstSeen: t0.Add(-time.Hour), LastSeen: t0, Totals: tot(10, 10, 100)},
			{Run: "sweep-2", Namespaces: []string{"team-a"}, FirstSeen: t0, LastSeen: t0, Totals: tot(20, 20, 200)},
		},
		TopEntries: []TopEntry{
			{Namespace: "team-a", Key: "aa", Backend: "xla", Hits: 1, SecondsSaved: 10, LastHit: t0.Add(time.Minute)},
			{Namespace: "team-a", Key: "bb", Backend: "xla", Hits: 9, SecondsSaved: 45, LastHit: t0},
		},
		MissReasons:   []ReasonCount{{Reason: "flags", Label: "XLA flags differ", Count: 1}, {Reason: "new", Label: "new", Count: 7}},
		StoreCounters: wire.Global{Evictions: 2, StoreBytes: 50, StoreEntries: 1, MaxBytes: 1000},
	}
	tests := []struct {
		name  string
		snaps []Snapshot
		opt   MergeOptions
		check func(t *testing.T, m Snapshot)
	}{
		{"none", nil, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if m.Totals.Lookups != 0 || len(m.Namespaces) != 0 || m.Runs == nil || m.TopEntries == nil {
				t.Errorf("empty merge: %+v", m)
			}
		}},
		{"totals and hit rate", []Snapshot{a, b}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if m.Totals.Lookups != 40 || m.Totals.Hits != 35 || m.Totals.HitRate != 35.0/40 || m.Totals.CompileSecondsSaved != 350 {
				t.Errorf("totals %+v", m.Totals)
			}
			if len(m.Namespaces) != 2 || m.Namespaces[0].Namespace != "team-a" || m.Namespaces[0].Lookups != 30 {
				t.Fatalf("namespaces %+v", m.Namespaces)
			}
			bs := m.Namespaces[0].Backends
			if len(bs) != 2 || bs[0].Backend != "passthrough" || bs[1].Backend != "xla" || bs[1].Lookups != 28 || bs[1].HitRate != 24.0/28 {
				t.Errorf("team-a backends %+v", bs)
			}
			if len(m.Backends) != 2 || m.Backends[1].Lookups != 38 {
				t.Errorf("backends %+v", m.Backends)
			}
			if g := m.StoreCounters; g.Evictions != 3 || g.StoreBytes != 150 || g.StoreEntries != 3 || g.MaxBytes != 2000 {
				t.Errorf("store counters %+v", g)
			}
		}},
		{"evictions by reason", []Snapshot{
			{Namespaces: []NamespaceTotals{{Namespace: "team-a", Totals: Totals{Evictions: 3, EvictionsByReason: wire.EvictionReasons{Quota: 2, Idle: 1}}}}},
			{Namespaces: []NamespaceTotals{{Namespace: "team-a", Totals: Totals{Evictions: 5, EvictionsByReason: wire.EvictionReasons{Quota: 1, Age: 4}}}}},
		}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			want := wire.EvictionReasons{Quota: 3, Idle: 1, Age: 4}
			if len(m.Namespaces) != 1 || m.Namespaces[0].Evictions != 8 || m.Namespaces[0].EvictionsByReason != want {
				t.Errorf("namespaces %+v, want team-a with 8 evictions split %+v", m.Namespaces, want)
			}
		}},
		{"runs merged by name", []Snapshot{a, b}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if len(m.Runs) != 2 || m.Runs[0].Run != "sweep-1" {
				t.Fatalf("runs %+v", m.Runs)
			}
			r := m.Runs[0]
			if r.Lookups != 20 || !r.FirstSeen.Equal(t0.Add(-time.Hour)) || !r.LastSeen.Equal(t0.Add(time.Hour)) || len(r.Namespaces) != 2 || r.Namespaces[0] != "team-a" {
				t.Errorf("sweep-1 %+v", r)
			}
		}},
		{"runs bounded", []Snapshot{a, b}, MergeOptions{MaxRuns: 1}, func(t *testing.T, m Snapshot) {
			if len(m.Runs) != 1 || m.Runs[0].Run != "sweep-1" {
				t.Errorf("runs %+v", m.Runs)
			}
		}},
		{"top entries merged and re-ranked", []Snapshot{a, b}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if len(m.TopEntries) != 2 {
				t.Fatalf("top %+v", m.TopEntries)
			}
			e := m.TopEntries[0]
			if e.Key != "aa" || e.Hits != 5 || e.SecondsSaved != 50 || !e.LastHit.Equal(t0.Add(time.Minute)) || m.TopEntries[1].Key != "bb" {
				t.Errorf("top %+v", m.TopEntries)
			}
		}},
		{"top entries bounded", []Snapshot{a, b}, MergeOptions{MaxTopEntries: 1}, func(t *testing.T, m Snapshot) {
			if len(m.TopEntries) != 1 || m.TopEntries[0].Key != "aa" {
				t.Errorf("top %+v", m.TopEntries)
			}
		}},
		{"miss reasons", []Snapshot{a, b}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if len(m.MissReasons) != 2 || m.MissReasons[0].Reason != "new" || m.MissReasons[1].Count != 4 {
				t.Errorf("reasons %+v", m.MissReasons)
			}
		}},
		{"saturates", []Snapshot{{Totals: Totals{Lookups: math.MaxInt64}}, {Totals: Totals{Lookups: 5}}}, MergeOptions{}, func(t *testing.T, m Snapshot) {
			if m.Totals.Lookups != math.MaxInt64 {
				t.Errorf("lookups %d", m.Totals.Lookups)
			}
		}},
		{"inputs untouched", []Snapshot{a, a}, MergeOptions{Now: t0}, func(t *testing.T, m Snapshot) {
			if a.TopEntries[0].Hits != 4 || a.Runs[0].Lookups != 10 || !m.GeneratedAt.Equal(t0) {
				t.Errorf("input modified: %+v", a)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, MergeSnapshots(tt.snaps, tt.opt))
		})
	}
}
