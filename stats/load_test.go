package stats

import (
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/explain"
)

// TestBadLabelsOnDiskAreSanitized loads a database as the code before the
// fix wrote it, with the labels it was given: every label loads valid and
// nothing is counted twice.
func TestBadLabelsOnDiskAreSanitized(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	c := Counters{Lookups: 2, Hits: 1, Misses: 1, Writes: 1, SavedMicros: 1e6}
	writeRaw(t, dir, map[string]any{
		pTotals + "team-a\x00xla":                                      c,
		pTotals + "team-a\x00\xff":                                     c,
		pTotals + "team-\xff\x00xla":                                   c,
		pTotals + "\xff\x00\xff":                                       c,
		pTotals + Other + "\x00xla":                                    c,
		string(bucketKey(pMinute, now.Unix()/60, "team-\xff", "\xff")): c,
		string(bucketKey(pHour, now.Unix()/3600, "team-\xff", "\xff")): c,
		pRun + "r1":   Run{Run: "r1", Namespaces: []string{"team-a", "team-\xff"}, FirstSeen: now, LastSeen: now, Counters: c},
		pRun + "\xff": Run{Run: "\xff", Namespaces: []string{"\xff"}, FirstSeen: now, LastSeen: now, Counters: c},
		pEntry + "team-\xff\x00" + hexKey(key(1)): Entry{Namespace: "team-\xff", Key: hexKey(key(1)), Name: "jit_\xff", Backend: "\xff",
			CompileSeconds: 1, Hits: 1, SavedMicros: 1e6, LastHit: now},
		pMisses + "team-\xff": persistedMisses{
			Recent: []Miss{{Time: now, Namespace: "team-\xff", Backend: "\xff", Key: "\xff", DisplayName: "\xff", Run: "\xff",
				Explanation: explain.Explanation{Reason: "\xff", Summary: "\xff", Nearest: []explain.Nearest{{Key: "\xff", Name: "\xff",
					Diffs: []explain.Diff{{Component: "\xff", Want: "\xff", Have: "\xff"}}}}}}},
			Reasons: map[string]int64{"\xff": 1, "xla_flags": 2},
		},
	})
	load := func(when string) Snapshot {
		s, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkLabels(t, when, s)
		return s.Snapshot(SnapshotOptions{})
	}
	first := load("loaded")
	if first.Totals.Lookups != 10 || first.Totals.CompileSecondsSaved != 5 {
		t.Fatalf("totals = %+v", first.Totals)
	}
	if len(first.Runs) != 2 || len(first.TopEntries) != 1 {
		t.Fatalf("runs %+v top entries %+v", first.Runs, first.TopEntries)
	}
	// Closing flushed the sanitized state; loading it again must give the
	// same totals (the bad keys were replaced, not kept beside).
	if again := load("reloaded"); again.Totals != first.Totals || len(again.Runs) != 2 || len(again.TopEntries) != 1 || len(again.MissReasons) != len(first.MissReasons) {
		t.Fatalf("after reload: totals %+v runs %d entries %d reasons %+v; first %+v", again.Totals, len(again.Runs), len(again.TopEntries), again.MissReasons, first.MissReasons)
	}
}
