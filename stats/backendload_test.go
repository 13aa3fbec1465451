package stats

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMadeUpBackendsOnDiskFold loads a database as builds before the
// backend-slot fix left it: made-up X-Cachesvc-Backend values on misses
// had taken backend slots, and their totals (busier than the real
// backends') were admitted again on load, taking every slot for good. Now
// a persisted backend with only misses, never admitted by the server
// (AdmitBackend: a plugin's, a stored entry's), counts under Other, said
// in one log line; a backend with writes or hits, unknown, and one
// admitted since (its mark persisted) keep their rows across restarts.
func TestMadeUpBackendsOnDiskFold(t *testing.T) {
	dir := t.TempDir()
	records := map[string]any{
		pTotals + "ns\x00xla":               Counters{Lookups: 3, Hits: 1, Misses: 2, Writes: 1},
		pTotals + "ns\x00" + UnknownBackend: Counters{Lookups: 1, Misses: 1},
	}
	for i := range 16 {
		records[fmt.Sprintf("%sns\x00made-up-%02d", pTotals, i)] = Counters{Lookups: 100, Misses: 100}
	}
	writeRaw(t, dir, records)
	var logs lockedBuffer
	open := func() *Stats {
		t.Helper()
		s, err := Open(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	backends := func(s *Stats) string {
		var out []string
		for _, b := range s.Snapshot(SnapshotOptions{}).Backends {
			out = append(out, fmt.Sprintf("%s=%d", b.Backend, b.Misses))
		}
		return strings.Join(out, " ")
	}
	s := open()
	if got, want := backends(s), Other+"=1600 unknown=1 xla=2"; got != want {
		t.Fatalf("loaded: misses by backend %s, want %s", got, want)
	}
	if !strings.Contains(logs.String(), `names="\"made-up-00\", `) || strings.Count(logs.String(), "\n") != 1 {
		t.Fatalf("want one log line naming the folded backends:\n%s", logs.String())
	}
	// The slots are free for the real backends the server knows.
	for i := range 13 {
		s.AdmitBackend(fmt.Sprintf("real-%02d", i))
	}
	s.AdmitNamespace("ns")
	s.RecordLookup(Lookup{Namespace: "ns", Backend: "real-12"})
	s.RecordLookup(Lookup{Namespace: "ns", Backend: "made-up-00"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if got, want := backends(s), Other+"=1601 real-12=1 unknown=1 xla=2"; got != want {
		t.Fatalf("reloaded: misses by backend %s, want %s", got, want)
	}
	if n := strings.Count(logs.String(), "only misses"); n != 1 {
		t.Fatalf("the fold is logged %d times over two starts, want once:\n%s", n, logs.String())
	}
	if got := s.backends.labelOf("real-03"); got != "real-03" {
		t.Fatalf("an admitted backend without counts is %q after a restart", got)
	}
}
