package stats

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/explain"
)

func key(i int) [32]byte {
	var k [32]byte
	k[0], k[1], k[31] = byte(i), byte(i>>8), 1
	return k
}

// seed records traffic of a known shape: 1,000 lookups across two namespaces
// (500 each, 375 hits each) and two runs (sweep-1: 500 lookups, 500 hits;
// sweep-2: 500 lookups, 250 hits), 750 hits in all of entries compiled in
// 2.5 s (so 1,875 s saved), hits serving 100 bytes each, and 10 writes of
// 1,000 bytes each.
func seed(s *Stats) {
	s.AdmitNamespace("team-a")
	s.AdmitNamespace("team-b")
	for i := 0; i < 1000; i++ {
		ns := []string{"team-a", "team-b"}[i%2]
		run := []string{"sweep-1", "sweep-2"}[(i/2)%2]
		s.RecordLookup(Lookup{Namespace: ns, Backend: "xla", Run: run, Key: key(i % 10), Name: fmt.Sprint("jit_f", i%10), Hit: i%8 < 6, Bytes: 100, CompileSeconds: 2.5})
	}
	for i := 0; i < 10; i++ {
		s.RecordWrite(Write{Namespace: "team-a", Backend: "xla", Run: "sweep-1", Key: key(i), Bytes: 1000, CompileSeconds: 2.5})
	}
}

func TestSeededTrafficSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	seed(s)
	check := func(when string, snap Snapshot) {
		t.Helper()
		tot := snap.Totals
		if tot.Lookups != 1000 || tot.Hits != 750 || tot.Misses != 250 || tot.HitRate != 0.75 || tot.CompileSecondsSaved != 1875 || tot.BytesOut != 75000 || tot.Writes != 10 || tot.BytesIn != 10000 {
			t.Fatalf("%s: totals = %+v", when, tot)
		}
		if len(snap.Namespaces) != 2 || snap.Namespaces[0].Namespace != "team-a" || snap.Namespaces[0].Lookups != 500 || snap.Namespaces[1].Hits != 375 {
			t.Fatalf("%s: namespaces = %+v", when, snap.Namespaces)
		}
		if len(snap.Runs) != 2 {
			t.Fatalf("%s: runs = %+v", when, snap.Runs)
		}
		for _, r := range snap.Runs {
			want := map[string]int64{"sweep-1": 500, "sweep-2": 250}[r.Run]
			if r.Lookups != 500 || r.Hits != want || r.CompileSecondsSaved != 2.5*float64(want) || len(r.Namespaces) != 2 {
				t.Fatalf("%s: run %+v", when, r)
			}
		}
		if len(snap.TopEntries) != 10 || snap.TopEntries[0].Hits != 75 || snap.TopEntries[0].SecondsSaved != 187.5 {
			t.Fatalf("%s: top entries = %+v", when, snap.TopEntries)
		}
	}
	check("before restart", s.Snapshot(SnapshotOptions{}))
	s2 := reopen(t, s, dir)
	check("after restart", s2.Snapshot(SnapshotOptions{}))
	ser, err := s2.Series("", time.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var lookups, hits int64
	var saved float64
	for i := range ser.Time {
		lookups += ser.Total.Lookups[i]
		hits += ser.Total.Hits[i]
		saved += ser.Total.SecondsSaved[i]
	}
	if lookups != 1000 || hits != 750 || saved != 1875 || len(ser.Namespaces) != 2 || len(ser.Backends) != 1 {
		t.Fatalf("series sums: lookups %d hits %d saved %v, %d namespaces", lookups, hits, saved, len(ser.Namespaces))
	}
	// New traffic after the restart adds to the persisted totals.
	s2.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Hit: true, CompileSeconds: 1})
	if tot := s2.Snapshot(SnapshotOptions{}).Totals; tot.Lookups != 1001 || tot.CompileSecondsSaved != 1876 {
		t.Fatalf("after new traffic: %+v", tot)
	}
}

func TestSeriesStepsAndNamespaceFilter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	clock := now
	var mu sync.Mutex
	s, err := Open(Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("team-a")
	s.AdmitNamespace("team-b")
	// One lookup per minute for 30 minutes in team-a, hits on even minutes.
	for i := 0; i < 30; i++ {
		mu.Lock()
		clock = now.Add(time.Duration(i) * time.Minute)
		mu.Unlock()
		s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Hit: i%2 == 0})
		s.RecordLookup(Lookup{Namespace: "team-b", Backend: "pt2", Hit: true})
	}
	tests := []struct {
		name   string
		ns     string
		step   time.Duration
		points int
		first  int64 // lookups in the first point
		res    string
	}{
		{"minutes all", "", time.Minute, 30, 2, "minute"},
		{"ten minutes team-a", "team-a", 10 * time.Minute, 3, 10, "minute"},
		{"hourly", "team-a", time.Hour, 1, 30, "hour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ser, err := s.Series(tt.ns, now, tt.step)
			if err != nil {
				t.Fatal(err)
			}
			if len(ser.Time) != tt.points || ser.Total.Lookups[0] != tt.first || ser.Resolution != tt.res {
				t.Fatalf("points %d first %d res %s: %+v", len(ser.Time), ser.Total.Lookups[0], ser.Resolution, ser.Total.Lookups)
			}
			if tt.ns != "" && (ser.Namespaces != nil || len(ser.Backends) != 1) {
				t.Fatalf("namespace filter: %+v %+v", ser.Namespaces, ser.Backends)
			}
		})
	}
	if _, err := s.Series("", now.Add(time.Hour), time.Minute); err != ErrBadRange {
		t.Fatalf("future since: %v", err)
	}
}

func TestCardinalityIsBounded(t *testing.T) {
	s, err := Open(Config{MaxNamespaces: 3, MaxBackends: 2, MaxRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 10; i++ {
		s.AdmitNamespace(fmt.Sprint("ns", i))
		s.RecordLookup(Lookup{Namespace: fmt.Sprint("ns", i), Backend: fmt.Sprint("be", i), Run: fmt.Sprint("run", i), Hit: true})
	}
	snap := s.Snapshot(SnapshotOptions{})
	if len(snap.Namespaces) != 4 || snap.Namespaces[0].Namespace != Other || snap.Namespaces[0].Lookups != 7 {
		t.Fatalf("namespaces = %+v", snap.Namespaces)
	}
	if len(snap.Backends) != 3 || len(snap.Runs) != 3 || snap.Totals.Lookups != 10 {
		t.Fatalf("backends %d runs %d totals %+v", len(snap.Backends), len(snap.Runs), snap.Totals)
	}
}

func TestMissesAreBoundedAndCountedByReason(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, MissesPerNamespace: 5})
	if err != nil {
		t.Fatal(err)
	}
	comps := map[string]string{"platform": "cpu", "jaxlib_version": "0.4.38", "xla_flags": ""}
	s.RecordWrite(Write{Namespace: "ns", Backend: "xla", Key: key(1), Name: "jit_f", Components: comps})
	for i := 0; i < 12; i++ {
		want := map[string]string{"platform": "cpu", "jaxlib_version": "0.4.38", "xla_flags": ""}
		if i%3 == 0 {
			want["platform"] = "cuda"
		} else {
			want["xla_flags"] = fmt.Sprint("--xla_n=", i)
		}
		ex := s.Explain("ns", "xla", want)
		s.RecordMiss(Miss{Namespace: "ns", Backend: "xla", Key: fmt.Sprint(i), Explanation: ex})
	}
	check := func(s *Stats) {
		rep := s.Misses("ns", 0)
		if rep.Total != 12 || len(rep.Recent) != 5 || rep.Recent[0].Key != "11" || rep.Recent[4].Key != "7" {
			t.Fatalf("report total %d recent %d first %q", rep.Total, len(rep.Recent), rep.Recent[0].Key)
		}
		if len(rep.ByReason) != 2 || rep.ByReason[0].Reason != "xla_flags" || rep.ByReason[0].Count != 8 || rep.ByReason[0].Label != "XLA flags differ" || rep.ByReason[1].Count != 4 {
			t.Fatalf("by reason = %+v", rep.ByReason)
		}
		if snap := s.Snapshot(SnapshotOptions{}); len(snap.MissReasons) != 2 {
			t.Fatalf("snapshot reasons = %+v", snap.MissReasons)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Config{Dir: dir, MissesPerNamespace: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check(s2)
	if rep := s2.Misses("empty", 0); rep.Total != 0 || rep.Recent == nil {
		t.Fatalf("empty report = %+v", rep)
	}
	if ex := s2.Explain("ns", "xla", comps); ex.Reason != explain.ReasonNoEntries {
		t.Fatalf("index is in memory only, seeded by the caller: %+v", ex)
	}
}

func TestStoreUsageSampling(t *testing.T) {
	var mu sync.Mutex
	u := Usage{Bytes: 100, MaxBytes: 1000, Entries: 1}
	s, err := Open(Config{Usage: func() Usage { mu.Lock(); defer mu.Unlock(); return u }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Snapshot(SnapshotOptions{})
	mu.Lock()
	u.Evictions, u.IntegrityFailures, u.Bytes = 3, 1, 900
	mu.Unlock()
	g := s.Snapshot(SnapshotOptions{}).StoreCounters
	if g.Evictions != 3 || g.IntegrityFailures != 1 || g.StoreBytes != 900 || g.MaxBytes != 1000 {
		t.Fatalf("store = %+v", g)
	}
	ser, err := s.Series("", time.Now().Add(-10*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ev int64
	for _, e := range ser.StoreEvictions {
		ev += e
	}
	if last := ser.StoreBytes[len(ser.StoreBytes)-1]; ev != 3 || last == nil || *last != 900 {
		t.Fatalf("store series: evictions %d last bytes %v", ev, last)
	}
}

func TestConcurrentRecordingIsExact(t *testing.T) {
	s, err := Open(Config{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				s.RecordLookup(Lookup{Namespace: fmt.Sprint("ns", g%3), Backend: "xla", Run: "r", Key: key(i), Hit: i%2 == 0, CompileSeconds: 0.5})
				if i%500 == 0 {
					s.Snapshot(SnapshotOptions{})
				}
			}
		}(g)
	}
	wg.Wait()
	tot := s.Snapshot(SnapshotOptions{}).Totals
	if tot.Lookups != 16000 || tot.Hits != 8000 || tot.CompileSecondsSaved != 4000 {
		t.Fatalf("totals = %+v", tot)
	}
}

func TestRecordAfterCloseIsIgnored(t *testing.T) {
	s, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.RecordLookup(Lookup{Namespace: "a", Hit: true})
	s.RecordMiss(Miss{Namespace: "a"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedFlushKeepsState checks that a flush that fails leaves what it
// took to be written by the next one.
func TestFailedFlushKeepsState(t *testing.T) {
	s, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.RecordLookup(Lookup{Namespace: "a", Backend: "xla", Run: "r", Key: key(1), Hit: true, CompileSeconds: 1})
	s.RecordMiss(Miss{Namespace: "a", Backend: "xla", Key: "k"})
	db := s.db
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err == nil {
		t.Fatal("flush to a closed database succeeded")
	}
	a := &s.agg
	a.mu.Lock()
	dirty := len(a.dirtyTotals) == 1 && len(a.dirtyRuns) == 1 && len(a.dirtyEntries) == 1 && len(a.dirtyMisses) == 1 && len(a.minutes) == 1
	a.mu.Unlock()
	if !dirty {
		t.Fatalf("state not restored: totals %d runs %d entries %d misses %d minutes %d", len(a.dirtyTotals), len(a.dirtyRuns), len(a.dirtyEntries), len(a.dirtyMisses), len(a.minutes))
	}
	if tot := s.Snapshot(SnapshotOptions{}).Totals; tot.Lookups != 1 {
		t.Fatalf("totals = %+v", tot)
	}
	s.closed.Store(true) // the database is already closed
	close(s.stop)
	<-s.done
}

// TestHammer records lookups, writes and misses from many goroutines while
// others read snapshots, series and misses and flush, under the race
// detector; the totals must come out exact.
func TestHammer(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), FlushInterval: 5 * time.Millisecond, MaxEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 4; i++ {
		s.AdmitNamespace(fmt.Sprint("ns", i))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1500; i++ {
				ns := fmt.Sprint("ns", (g+i)%4)
				s.RecordLookup(Lookup{Namespace: ns, Backend: "xla", Run: fmt.Sprint("run", i%7), Key: key(i), Hit: i%3 != 0, CompileSeconds: 0.25, Bytes: 10})
				if i%3 == 0 {
					s.RecordMiss(Miss{Namespace: ns, Backend: "xla", Key: fmt.Sprint(i), Explanation: s.Explain(ns, "xla", map[string]string{"platform": "cpu"})})
				}
				if i%100 == 0 {
					s.RecordWrite(Write{Namespace: ns, Backend: "xla", Key: key(i), Components: map[string]string{"platform": "tpu"}})
				}
			}
		}(g)
	}
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Snapshot(SnapshotOptions{})
				s.Misses("ns1", 10)
				if _, err := s.Series("", time.Now().Add(-time.Hour), time.Minute); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	tot := s.Snapshot(SnapshotOptions{}).Totals
	if tot.Lookups != 9000 || tot.Hits != 6000 || tot.CompileSecondsSaved != 1500 || tot.Writes != 90 {
		t.Fatalf("totals = %+v", tot)
	}
	var misses int64
	for i := 0; i < 4; i++ {
		misses += s.Misses(fmt.Sprint("ns", i), 0).Total
	}
	if misses != 3000 {
		t.Fatalf("misses counted = %d, want 3000", misses)
	}
}

// reopen closes s and opens the database in dir again, closed when the
// test ends.
func reopen(t *testing.T, s *Stats, dir string) *Stats {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// openMem opens statistics kept in memory, closed when the test ends.
func openMem(t *testing.T) *Stats {
	t.Helper()
	s, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestForgetEntry: an entry forgotten after a delete (backend unknown to the
// caller) or an eviction (backend known) no longer explains misses.
func TestForgetEntry(t *testing.T) {
	comps := func(flags string) map[string]string {
		return map[string]string{"module": "m1", "platform": "cpu", "xla_flags": flags}
	}
	tests := []struct {
		name, backend string
	}{
		{"eviction", "xla"},
		{"delete", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a, b := [32]byte{1}, [32]byte{2}
			s.RecordWrite(Write{Namespace: "ns", Backend: "xla", Key: a, Name: "f", Components: comps("--a")})
			s.RecordWrite(Write{Namespace: "ns", Backend: "xla", Key: b, Name: "g", Components: comps("--b")})
			s.ForgetEntry("ns", tt.backend, a)
			ex := s.Explain("ns", "xla", comps("--c"))
			if ex.Compared != 1 || len(ex.Nearest) != 1 || ex.Nearest[0].Name != "g" {
				t.Fatalf("after forgetting f: %+v", ex)
			}
			s.ForgetEntry("ns", tt.backend, b)
			if ex := s.Explain("ns", "xla", comps("--c")); ex.Reason != explain.ReasonNoEntries {
				t.Fatalf("after forgetting both: %+v", ex)
			}
		})
	}
}

// TestMissesDoNotAdmitBackends: a miss's backend is what the reader claims
// (X-Cachesvc-Backend), so misses naming made-up backends count under
// Other instead of taking the MaxBackends slots; a backend admitted
// (a loaded plugin's), written or hit counts under itself.
func TestMissesDoNotAdmitBackends(t *testing.T) {
	s, err := Open(Config{MaxBackends: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("ns")
	for i := 0; i < 20; i++ {
		s.RecordLookup(Lookup{Namespace: "ns", Backend: fmt.Sprint("made-up-", i)})
	}
	s.AdmitBackend("xla")
	s.AdmitBackend("Not Valid") // ignored
	s.RecordLookup(Lookup{Namespace: "ns", Backend: "xla"})
	s.RecordWrite(Write{Namespace: "ns", Backend: "pt2", Key: key(1)})
	s.RecordLookup(Lookup{Namespace: "ns", Backend: "pt2"})
	s.RecordLookup(Lookup{Namespace: "ns", Backend: "passthrough", Key: key(2), Hit: true})
	s.RecordLookup(Lookup{Namespace: "ns", Backend: ""})
	got := map[string]int64{}
	for _, b := range s.Snapshot(SnapshotOptions{}).Backends {
		got[b.Backend] = b.Lookups
	}
	want := map[string]int64{Other: 20, "xla": 1, "pt2": 1, "passthrough": 1, UnknownBackend: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lookups by backend %v, want %v", got, want)
	}
}

// TestNamespaceStoreSeries: a namespace's series charts the bytes that
// namespace stores, not the whole store's; the all-namespaces series keeps
// the store's; both survive a restart (hour records included).
func TestNamespaceStoreSeries(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	u := Usage{Bytes: 1000, Entries: 3, Namespaces: map[string]int64{"team-a": 100, "team-b": 900}}
	usage := func() Usage { mu.Lock(); defer mu.Unlock(); return u }
	s, err := Open(Config{Dir: dir, Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	s.AdmitNamespace("team-b")
	s.Snapshot(SnapshotOptions{})
	mu.Lock()
	u.Bytes, u.Namespaces = 1200, map[string]int64{"team-a": 300, "team-b": 900}
	mu.Unlock()
	tests := []struct {
		ns   string
		want int64
	}{
		{"", 1200},
		{"team-a", 300},
		{"team-b", 900},
		{"team-c", 0},
	}
	check := func(when string, s *Stats) {
		for _, tt := range tests {
			for _, step := range []time.Duration{time.Minute, time.Hour} {
				ser, err := s.Series(tt.ns, time.Now().Add(-10*time.Minute), step)
				if err != nil {
					t.Fatal(err)
				}
				if got := ser.StoreBytes[len(ser.StoreBytes)-1]; got == nil || *got != tt.want {
					t.Errorf("%s: namespace %q step %v: last store bytes %v, want %d", when, tt.ns, step, got, tt.want)
				}
			}
		}
	}
	check("live", s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Config{Dir: dir, Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check("after restart", s2)
}
