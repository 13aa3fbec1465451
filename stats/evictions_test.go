package stats

import (
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

// TestEvictionReasonsSurviveRestart: evictions recorded with their reason
// are persisted per namespace by reason, as hits and misses are, and an
// unknown reason counts in Evictions only.
func TestEvictionReasonsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	s.AdmitNamespace("team-b")
	s.RecordEvictions("team-a", "xla", wire.ReasonQuota, 3)
	s.RecordEvictions("team-a", "passthrough", wire.ReasonQuota, 1)
	s.RecordEvictions("team-a", "xla", wire.ReasonAge, 2)
	s.RecordEvictions("team-b", "xla", wire.ReasonIdle, 1)
	s.RecordEvictions("team-b", "xla", "no-such-reason", 5)
	want := map[string]wire.EvictionReasons{"team-a": {Quota: 4, Age: 2}, "team-b": {Idle: 1}}
	evictions := map[string]int64{"team-a": 6, "team-b": 6}
	check := func(when string, s *Stats) {
		t.Helper()
		got := s.NamespaceEvictions()
		if len(got) != len(want) || got["team-a"] != want["team-a"] || got["team-b"] != want["team-b"] {
			t.Errorf("%s: NamespaceEvictions = %+v, want %+v", when, got, want)
		}
		for _, n := range s.Snapshot(SnapshotOptions{}).Namespaces {
			if n.EvictionsByReason != want[n.Namespace] {
				t.Errorf("%s: %s's totals split evictions %+v, want %+v", when, n.Namespace, n.EvictionsByReason, want[n.Namespace])
			}
			if w := evictions[n.Namespace]; n.Evictions != w {
				t.Errorf("%s: %s has %d evictions, want %d", when, n.Namespace, n.Evictions, w)
			}
		}
	}
	check("before restart", s)
	s2 := reopen(t, s, dir)
	check("after restart", s2)
	s2.RecordEvictions("team-a", "xla", wire.ReasonSize, 1)
	want["team-a"], evictions["team-a"] = wire.EvictionReasons{Size: 1, Quota: 4, Age: 2}, 7
	check("after a new eviction", s2)
}

// TestStoreCountersAfterRestart: the store's counters (Config.Usage) start
// again at 0 with each process, and the first sample of a new process
// counts them whole. Before, it counted them as a delta from the previous
// process's last sample, losing that process's final count whenever the
// new one's had reached it: evictions at open down to a lowered
// --max-size vanished from store_counters (a drill persisted 431 against
// 5,249 evicted since the start).
func TestStoreCountersAfterRestart(t *testing.T) {
	tests := []struct {
		name             string
		before, atOpen   int64 // the store's count in the first process, and at the second's first sample
		wantAfterRestart int64
	}{
		{"fewer at open than before", 5, 3, 8},
		{"as many at open as before", 5, 5, 10},
		{"more at open than before", 2, 6, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var u Usage
			open := func() *Stats {
				s, err := Open(Config{Dir: dir, Usage: func() Usage { return u }})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := open()
			s.Snapshot(SnapshotOptions{})
			u.Evictions, u.IntegrityFailures = tc.before, tc.before
			s.Snapshot(SnapshotOptions{})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			u.Evictions, u.IntegrityFailures = tc.atOpen, tc.atOpen // a new process's store
			s = open()
			defer s.Close()
			g := s.Snapshot(SnapshotOptions{}).StoreCounters
			if g.Evictions != tc.wantAfterRestart || g.IntegrityFailures != tc.wantAfterRestart {
				t.Errorf("after the restart: evictions %d, integrity failures %d; want %d of each", g.Evictions, g.IntegrityFailures, tc.wantAfterRestart)
			}
		})
	}
}
