package stats

import (
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/storetest"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestUnsavedMinutesBounded records lookups for two hours while the
// statistics directory is read-only, one a minute: the per-minute deltas
// that wait for a flush that can save them are bounded to the last
// DefaultMaxUnsavedMinutes minutes, older ones are dropped (counted,
// said once at WARN), and the totals keep every lookup. Before, every
// minute waited in memory for as long as the directory stayed unwritable.
func TestUnsavedMinutesBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stats")
	var logs storetest.LogBuffer
	clock := &fakeClock{now: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	start := clock.Now()
	s, err := Open(Config{Dir: dir, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	s.AdmitNamespace("team")
	restore := storetest.MakeReadOnly(t, dir)
	const minutes = 120
	for i := range minutes {
		s.RecordLookup(Lookup{Namespace: "team", Backend: "xla", Hit: true, Bytes: 1, CompileSeconds: 1})
		if err := s.Flush(); err != nil {
			t.Fatalf("flush %d into a read-only directory: %v, want it skipped", i, err)
		}
		if i < minutes-1 {
			clock.add(time.Minute)
		}
	}
	s.agg.mu.Lock()
	held := len(s.agg.minutes)
	s.agg.mu.Unlock()
	if held > DefaultMaxUnsavedMinutes {
		t.Errorf("%d unsaved minutes held in memory after %d minutes unwritable, want at most %d", held, minutes, DefaultMaxUnsavedMinutes)
	}
	restore()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Snapshot(SnapshotOptions{}).Totals.Hits, int64(minutes); got != want {
		t.Errorf("total hits %d, want %d: the bound drops minutes of the series, not counts", got, want)
	}
	series, err := s.Series("team", start.Add(-time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var saved, old int
	for i, n := range series.Total.Hits {
		if n == 0 {
			continue
		}
		saved++
		if clock.Now().Unix()-series.Time[i] >= DefaultMaxUnsavedMinutes*60 {
			old++
		}
	}
	if saved != DefaultMaxUnsavedMinutes || old != 0 {
		t.Errorf("%d minutes saved after access came back, %d of them older than %d minutes; want the last %d only", saved, old, DefaultMaxUnsavedMinutes, DefaultMaxUnsavedMinutes)
	}
	if got, want := s.UnsavedMinutesDropped(), int64(minutes-DefaultMaxUnsavedMinutes); got != want {
		t.Errorf("UnsavedMinutesDropped = %d, want %d", got, want)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"per-minute statistics"); n != 1 {
		t.Errorf("%d WARN lines about dropped minutes, want 1:\n%s", n, logs.String())
	}
}
