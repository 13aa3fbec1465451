package stats

import (
	"testing"
	"time"
)

// TestRunFirstHit checks that a run's FirstHit is the time of its first hit
// (zero for a run that never hit), whatever flushes and restarts fall
// between its lookups.
func TestRunFirstHit(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	dir := t.TempDir()
	cfg := Config{Dir: dir, Now: func() time.Time { return now }}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	// Each step is (seconds after t0, run, hit); a flush after every step
	// and a restart in the middle split the runs' deltas.
	steps := []struct {
		at  int
		run string
		hit bool
	}{
		{0, "arm-a", false}, {0, "arm-b", false}, {0, "arm-c", false},
		{30, "arm-a", true}, {60, "arm-b", false},
		{90, "arm-a", true}, {120, "arm-b", true},
	}
	for i, st := range steps {
		now = t0.Add(time.Duration(st.at) * time.Second)
		s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: st.run, Hit: st.hit, CompileSeconds: 1})
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { s.Close() })
	want := map[string]time.Duration{"arm-a": 30 * time.Second, "arm-b": 120 * time.Second, "arm-c": -1}
	runs := s.Snapshot(SnapshotOptions{}).Runs
	if len(runs) != len(want) {
		t.Fatalf("runs = %+v, want %d", runs, len(want))
	}
	for _, r := range runs {
		w := want[r.Run]
		switch {
		case w < 0 && !r.FirstHit.IsZero():
			t.Errorf("%s never hit but FirstHit = %v", r.Run, r.FirstHit)
		case w >= 0 && !r.FirstHit.Equal(t0.Add(w)):
			t.Errorf("%s: FirstHit = %v, want %v", r.Run, r.FirstHit, t0.Add(w))
		case !r.FirstSeen.Equal(t0):
			t.Errorf("%s: FirstSeen = %v, want %v", r.Run, r.FirstSeen, t0)
		}
	}
	// The fleet's merge keeps the earliest first hit of the replicas'.
	other := Snapshot{Runs: []RunTotals{{Run: "arm-b", FirstSeen: t0, LastSeen: t0, FirstHit: t0.Add(10 * time.Second)}}}
	merged := MergeSnapshots([]Snapshot{s.Snapshot(SnapshotOptions{}), other}, MergeOptions{})
	for _, r := range merged.Runs {
		if r.Run == "arm-b" && !r.FirstHit.Equal(t0.Add(10*time.Second)) {
			t.Errorf("merged arm-b FirstHit = %v, want the earlier replica's", r.FirstHit)
		}
	}
}
