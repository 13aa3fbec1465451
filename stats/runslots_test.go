package stats

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is a clock that tests advance; the flush loop reads it too.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func runsOf(s *Stats) map[string]RunTotals {
	return runMap(s.Snapshot(SnapshotOptions{MaxRuns: 10_000}))
}
func runMap(snap Snapshot) map[string]RunTotals { return indexRuns(snap.Runs) }

func indexRuns(rs []RunTotals) map[string]RunTotals {
	m := make(map[string]RunTotals, len(rs))
	for _, r := range rs {
		m[r.Run] = r
	}
	return m
}

// syncBuffer is a goroutine-safe log sink (the flush loop logs).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFullRunTableTracksANewRun: with the run table full of made-up runs
// (what a busy CI makes in days, a reader in seconds), a new real run gets
// its own row, before and after a restart, by taking the slot of the least
// recently seen run, whose counts fold into _other, so that the sum of the
// runs' lookups still equals the lookups that carried a run. Before, every
// run past the 500th counted under _other for good.
func TestFullRunTableTracksANewRun(t *testing.T) {
	const maxRuns = 500 // the default
	dir := t.TempDir()
	clock := newTestClock()
	logs := &syncBuffer{}
	cfg := Config{Dir: dir, Now: clock.Now, FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	for i := range maxRuns {
		clock.Advance(time.Second)
		s.RecordLookup(Lookup{Namespace: "team-a", Run: fmt.Sprintf("made-up-%03d", i)})
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot(SnapshotOptions{}).Totals
	clock.Advance(time.Second)
	s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "ci-1234", Key: key(1), Hit: true, Bytes: 10, CompileSeconds: 3})
	s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "ci-1234", Key: key(2)})
	check := func(t *testing.T, s *Stats) {
		t.Helper()
		snap := s.Snapshot(SnapshotOptions{MaxRuns: 10_000})
		runs := runMap(snap)
		real, ok := runs["ci-1234"]
		if !ok || real.Lookups != 2 || real.Hits != 1 || real.Misses != 1 {
			t.Fatalf("run ci-1234 = %+v (tracked %v), want its own row with 2 lookups, 1 hit", real, ok)
		}
		if _, ok := runs["made-up-000"]; ok {
			t.Errorf("made-up-000, the least recently seen run, is still tracked")
		}
		if _, ok := runs["made-up-001"]; !ok {
			t.Errorf("made-up-001 was evicted too")
		}
		if o := runs[Other]; o.Lookups != 1 || o.Misses != 1 {
			t.Errorf("%s = %+v, want made-up-000's one miss folded in", Other, o)
		}
		if len(runs) != maxRuns+1 {
			t.Errorf("%d runs reported, want %d and %s", len(runs), maxRuns, Other)
		}
		var sum int64
		for _, r := range runs {
			sum += r.Lookups
		}
		if sum != maxRuns+2 || snap.Totals.Lookups != before.Lookups+2 {
			t.Errorf("runs sum to %d lookups, totals %d (before the real run %d): want %d and %d", sum, snap.Totals.Lookups, before.Lookups, maxRuns+2, maxRuns+2)
		}
	}
	check(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "run=made-up-000") || !strings.Contains(logs.String(), "namespace=team-a") {
		t.Errorf("no log line names the evicted run and its namespace:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "run table full"); n != 1 {
		t.Errorf("%d eviction log lines, want 1:\n%s", n, logs.String())
	}
	s2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check(t, s2)
	// After the restart the policy is the same: the next new run evicts
	// the least recently seen one (made-up-001), not the real run.
	clock.Advance(time.Second)
	s2.RecordLookup(Lookup{Namespace: "team-a", Run: "ci-1235"})
	runs := runsOf(s2)
	if _, ok := runs["ci-1235"]; !ok {
		t.Fatalf("after a restart a new run is not tracked: %+v", runs[Other])
	}
	if _, ok := runs["made-up-001"]; ok {
		t.Errorf("after a restart made-up-001, the least recently seen, is still tracked")
	}
	if _, ok := runs["ci-1234"]; !ok {
		t.Errorf("after a restart the new run evicted ci-1234")
	}
	if o := runs[Other]; o.Lookups != 2 {
		t.Errorf("%s has %d lookups after a second eviction, want 2", Other, o.Lookups)
	}
}

// TestRunEvictionOrder: which run a new one evicts from a full table, and
// that every lookup stays counted exactly once across the runs, however
// recording and merging interleave with evictions.
func TestRunEvictionOrder(t *testing.T) {
	type step struct {
		ns, run string
		collect bool // merge (Snapshot) after the lookup
	}
	tests := []struct {
		name    string
		maxRuns int
		steps   []step
		want    map[string]int64 // run → lookups, Other included
	}{
		{"the least recently seen goes", 2,
			[]step{{"a", "r1", true}, {"a", "r2", true}, {"a", "r1", true}, {"a", "r3", true}},
			map[string]int64{"r1": 2, "r3": 1, Other: 1}},
		{"a namespace flooding runs evicts its own", 3,
			[]step{{"a", "a1", true}, {"b", "b1", true}, {"b", "b2", true}, {"b", "b3", true}, {"b", "b4", true}},
			map[string]int64{"a1": 1, "b3": 1, "b4": 1, Other: 2}},
		{"a quiet namespace's new run evicts from the busiest", 3,
			[]step{{"b", "b1", true}, {"b", "b2", true}, {"a", "a1", true}, {"a", "a2", true}},
			map[string]int64{"b2": 1, "a1": 1, "a2": 1, Other: 1}},
		{"counted before the eviction, merged after", 1,
			[]step{{"a", "r1", false}, {"a", "r2", false}},
			map[string]int64{"r2": 1, Other: 1}},
		{"evicted and back before a merge", 1,
			[]step{{"a", "r1", true}, {"a", "r2", false}, {"a", "r1", false}},
			map[string]int64{"r1": 1, Other: 2}},
		{"made-up namespaces share _other's slots", 3,
			[]step{{"a", "real", true}, {"nope-1", "x1", true}, {"nope-2", "x2", true}, {"nope-3", "x3", true}, {"nope-4", "x4", true}},
			map[string]int64{"real": 1, "x3": 1, "x4": 1, Other: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newTestClock()
			s, err := Open(Config{MaxRuns: tt.maxRuns, Now: clock.Now, FlushInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.AdmitNamespace("a")
			s.AdmitNamespace("b")
			for _, st := range tt.steps {
				clock.Advance(time.Second)
				s.RecordLookup(Lookup{Namespace: st.ns, Run: st.run})
				if st.collect {
					s.Snapshot(SnapshotOptions{})
				}
			}
			got := map[string]int64{}
			for id, r := range runsOf(s) {
				got[id] = r.Lookups
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("runs' lookups = %v, want %v", got, tt.want)
			}
			if n := s.Runs(); n != len(tt.want)-1 {
				t.Errorf("Runs() = %d, want %d", n, len(tt.want)-1)
			}
		})
	}
}

// TestRunEvictionLogIsRateLimited: a flood of new runs logs one line a
// minute, naming the last run evicted and its namespace, and
// RunEvictions counts every eviction.
func TestRunEvictionLogIsRateLimited(t *testing.T) {
	clock := newTestClock()
	logs := &syncBuffer{}
	s, err := Open(Config{MaxRuns: 1, Now: clock.Now, FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("team-a")
	for i := range 31 {
		clock.Advance(time.Second)
		s.RecordLookup(Lookup{Namespace: "team-a", Run: fmt.Sprint("r", i)})
		s.Snapshot(SnapshotOptions{})
	}
	if n := strings.Count(logs.String(), "run table full"); n != 1 {
		t.Fatalf("%d lines in 30 s of evictions, want 1:\n%s", n, logs.String())
	}
	clock.Advance(time.Minute)
	s.RecordLookup(Lookup{Namespace: "team-a", Run: "last"})
	s.Snapshot(SnapshotOptions{})
	out := logs.String()
	if n := strings.Count(out, "run table full"); n != 2 || !strings.Contains(out, "evicted=30 namespace=team-a run=r30") {
		t.Fatalf("want a second line counting the 30 evictions since the first and naming r30:\n%s", out)
	}
	if n := s.RunEvictions(); n != 31 {
		t.Errorf("RunEvictions() = %d, want 31", n)
	}
}

// TestRunEvictionsUnderLoadStayExact: goroutines cycling many run ids
// through a small run table while merges run beside them: every lookup is
// counted in exactly one run's row (Other included), and at most MaxRuns
// runs keep their own.
func TestRunEvictionsUnderLoadStayExact(t *testing.T) {
	const maxRuns, workers, perWorker = 8, 4, 2000
	s, err := Open(Config{MaxRuns: maxRuns, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("a")
	s.AdmitNamespace("b")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Snapshot(SnapshotOptions{})
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				s.RecordLookup(Lookup{Namespace: []string{"a", "b"}[w%2], Run: fmt.Sprintf("w%d-r%d", w, i%50), Hit: i%2 == 0})
			}
		})
	}
	wg.Wait()
	close(stop)
	snap := s.Snapshot(SnapshotOptions{MaxRuns: 10_000})
	var sum int64
	for _, r := range snap.Runs {
		sum += r.Lookups
	}
	if sum != workers*perWorker || snap.Totals.Lookups != workers*perWorker {
		t.Errorf("runs sum to %d lookups, totals %d, want %d", sum, snap.Totals.Lookups, workers*perWorker)
	}
	if len(snap.Runs) > maxRuns+1 || s.Runs() > maxRuns {
		t.Errorf("%d runs reported, %d tracked: want at most %d and %s", len(snap.Runs), s.Runs(), maxRuns, Other)
	}
	if s.RunEvictions() == 0 {
		t.Errorf("no evictions counted")
	}
}
