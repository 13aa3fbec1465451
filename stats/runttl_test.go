package stats

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// runLookups returns each run's lookups (Other included) and their sum.
func runLookups(s *Stats) (map[string]int64, int64) {
	got := map[string]int64{}
	var sum int64
	for id, r := range runsOf(s) {
		got[id] = r.Lookups
		sum += r.Lookups
	}
	return got, sum
}

// TestIdleRunsFoldIntoOther: a run idle for RunTTL leaves the run table as
// an evicted one does, its counts folding into _other, so that the runs
// still sum to every lookup that carried a run, while serving, after
// _other itself has been idle that long, and after a restart. Before, an
// idle run was dropped, counts and all (and so was _other once idle).
func TestIdleRunsFoldIntoOther(t *testing.T) {
	const ttl = time.Hour
	dir := t.TempDir()
	clock := newTestClock()
	cfg := Config{Dir: dir, RunTTL: ttl, Now: clock.Now, FlushInterval: time.Hour}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "r1", Key: key(1), Hit: true, CompileSeconds: 1})
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "r1", Key: key(2)})
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "r2", Key: key(3)})
	s.Snapshot(SnapshotOptions{})
	steps := []struct {
		name    string
		advance time.Duration
		lookup  string // a run looked up after advancing, "" for none
		restart bool
		want    map[string]int64
	}{
		{"both within the TTL", 40 * time.Minute, "r2", false, map[string]int64{"r1": 2, "r2": 2}},
		{"r1 past the TTL", 30 * time.Minute, "", false, map[string]int64{"r2": 2, Other: 2}},
		{"every run past the TTL, _other too", 2 * ttl, "", false, map[string]int64{Other: 4}},
		{"after a restart", 0, "", true, map[string]int64{Other: 4}},
		{"a new run after the restart", ttl, "r3", false, map[string]int64{"r3": 1, Other: 4}},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		if st.restart {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
		}
		if st.lookup != "" {
			s.RecordLookup(Lookup{Namespace: "team-a", Run: st.lookup, Key: key(4)})
		}
		got, sum := runLookups(s)
		total := s.Snapshot(SnapshotOptions{}).Totals.Lookups
		if fmt.Sprint(got) != fmt.Sprint(st.want) || sum != total {
			t.Errorf("%s: runs' lookups %v (sum %d), want %v (the totals' %d)", st.name, got, sum, st.want, total)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunsOutliveADowntimeLongerThanRunTTL: a server stopped for longer
// than RunTTL finds its runs on restart and folds the idle ones into
// _other. Before, each run's record expired in Badger RunTTL after it was
// written, so their counts (and _other's) were lost while the totals kept
// them. A record an older build wrote with that TTL (legacy) is rewritten
// without it at the first flush after a start. The database's TTLs run on
// the real clock, so rather than wait for one to pass the test checks that
// no run record carries one.
func TestRunsOutliveADowntimeLongerThanRunTTL(t *testing.T) {
	const ttl = time.Second
	dir := t.TempDir()
	clock := newTestClock()
	cfg := Config{Dir: dir, RunTTL: ttl, Now: clock.Now, FlushInterval: time.Hour}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "r1", Key: key(1)})
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "r1", Key: key(2)})
	legacy, err := json.Marshal(Run{Run: "legacy", Namespaces: []string{"team-a"}, FirstSeen: clock.Now(), LastSeen: clock.Now(), Counters: Counters{Lookups: 3, Misses: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.SetEntry(badger.NewEntry([]byte(pRun+"legacy"), legacy).WithTTL(2 * ttl))
	}); err != nil {
		t.Fatal(err)
	}
	// A restart: this start reads the legacy record and rewrites it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * ttl)
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if exp := runExpiries(t, s); len(exp) > 0 {
		t.Errorf("run records with a TTL (Unix expiry): %v, want none: they would expire while the server is down", exp)
	}
	got, _ := runLookups(s)
	if want := map[string]int64{Other: 2 + 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the downtime: runs' lookups %v, want %v (r1's 2 and legacy's 3)", got, want)
	}
}

// runExpiries returns the Badger expiry of each persisted run record
// that has one.
func runExpiries(t *testing.T, s *Stats) map[string]uint64 {
	t.Helper()
	exp := map[string]uint64{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		p := []byte(pRun)
		for it.Seek(p); it.ValidForPrefix(p); it.Next() {
			if e := it.Item().ExpiresAt(); e != 0 {
				exp[string(it.Item().Key()[len(p):])] = e
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// TestRunEvictionsSurviveRestart: RunEvictions (cachesvc_stats_run_evictions_total)
// is persisted with the run table whose evictions it counts, as every
// other counter of the statistics is, and the eviction log line after a
// restart counts only the evictions since. Before, it restarted from 0
// while the runs it had folded stayed in _other.
func TestRunEvictionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	logs := &syncBuffer{}
	cfg := Config{Dir: dir, MaxRuns: 1, Now: clock.Now, FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	steps := []struct {
		name    string
		runs    int // new runs looked up, each evicting the last
		restart bool
		want    int64
	}{
		{"before a restart", 4, false, 3},
		{"after a restart", 0, true, 3},
		{"new evictions after the restart", 2, false, 5},
		{"after a second restart", 0, true, 5},
	}
	n := 0
	for _, st := range steps {
		if st.restart {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(cfg); err != nil {
				t.Fatal(err)
			}
		}
		for range st.runs {
			clock.Advance(time.Minute)
			s.RecordLookup(Lookup{Namespace: "team-a", Run: fmt.Sprint("r", n)})
			n++
			s.Snapshot(SnapshotOptions{})
		}
		if got := s.RunEvictions(); got != st.want {
			t.Errorf("%s: RunEvictions() = %d, want %d", st.name, got, st.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// One line per eviction (a minute apart), each counting one.
	if got, want := strings.Count(logs.String(), "evicted=1 "), 5; got != want || strings.Contains(logs.String(), "evicted=-") {
		t.Errorf("%d log lines counting one eviction, want %d:\n%s", got, want, logs.String())
	}
}

// TestRunsIdlePastRunTTLAtLoadFreeTheirSlots: a run already idle for
// longer than RunTTL when the statistics open folds into _other at once,
// as collect folds it while serving. Before, it kept its slot until the
// first collect, so a new run admitted before it into a full table evicted
// a run in use (of the namespace holding the most slots) while the idle
// run's slot stayed taken, and counted an eviction.
func TestRunsIdlePastRunTTLAtLoadFreeTheirSlots(t *testing.T) {
	const ttl = time.Hour
	clock := newTestClock()
	logs := &syncBuffer{}
	cfg := Config{Dir: t.TempDir(), RunTTL: ttl, MaxRuns: 3, Now: clock.Now, FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	s.AdmitNamespace("team-b")
	s.RecordLookup(Lookup{Namespace: "team-b", Run: "b1"})
	clock.Advance(50 * time.Minute)
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "a1"})
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "a2"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute) // b1 idle 80 minutes, a1 and a2 30
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Runs(); got != 2 {
		t.Errorf("at load: %d runs hold slots, want 2 (a1, a2; b1 idle past RunTTL)", got)
	}
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "a3"})
	got, _ := runLookups(s)
	if want := map[string]int64{"a1": 1, "a2": 1, "a3": 1, Other: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("runs' lookups %v, want %v (b1's in %s)", got, want, Other)
	}
	if n := s.RunEvictions(); n != 0 {
		t.Errorf("RunEvictions() = %d, want 0: a free slot was there", n)
	}
	if strings.Contains(logs.String(), "relabelled") {
		t.Errorf("folding an idle run logged a warning, as collect does not:\n%s", logs.String())
	}
}
