package stats

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// TestRunTiesKeepTheirOrderAcrossARestart: runs last seen in the same
// second are evicted in the order they were admitted (the run table's
// tie-break), and a restart of the statistics (real Badger, closed and
// opened again) keeps that order. Before, load re-admitted them by their
// last-seen time to the nanosecond, then by name, so after a restart a
// new run could evict the other one of the tie.
func TestRunTiesKeepTheirOrderAcrossARestart(t *testing.T) {
	type step struct {
		advance time.Duration
		run     string
	}
	tests := []struct {
		name   string
		steps  []step // all within one second
		victim string // the run a new one evicts from the full table
		kept   string
	}{
		{"zeta admitted first, one instant", []step{{0, "zeta"}, {0, "alpha"}}, "zeta", "alpha"},
		{"alpha admitted first, one instant", []step{{0, "alpha"}, {0, "zeta"}}, "alpha", "zeta"},
		{"the first admitted seen again later in the second",
			[]step{{100 * time.Millisecond, "beta"}, {100 * time.Millisecond, "alpha"}, {100 * time.Millisecond, "beta"}}, "beta", "alpha"},
	}
	for _, tt := range tests {
		for _, restart := range []bool{false, true} {
			name := tt.name
			if restart {
				name += ", restarted"
			}
			t.Run(name, func(t *testing.T) {
				clock := newTestClock()
				cfg := Config{Dir: t.TempDir(), MaxRuns: 2, Now: clock.Now, FlushInterval: time.Hour}
				s, err := Open(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { s.Close() }()
				s.AdmitNamespace("a")
				for _, st := range tt.steps {
					clock.Advance(st.advance)
					s.RecordLookup(Lookup{Namespace: "a", Run: st.run})
				}
				if restart {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if s, err = Open(cfg); err != nil {
						t.Fatal(err)
					}
				}
				clock.Advance(time.Second)
				s.RecordLookup(Lookup{Namespace: "a", Run: "new"})
				runs := runsOf(s)
				if _, ok := runs[tt.victim]; ok {
					t.Errorf("%s is still tracked, want it evicted for run new (runs: %v)", tt.victim, slices.Sorted(maps.Keys(runs)))
				}
				if _, ok := runs[tt.kept]; !ok {
					t.Errorf("%s was evicted, want %s evicted (runs: %v)", tt.kept, tt.victim, slices.Sorted(maps.Keys(runs)))
				}
			})
		}
	}
}
