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
