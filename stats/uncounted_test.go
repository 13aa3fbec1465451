package stats

import (
	"sync"
	"testing"
	"time"
)

// TestStoreSeriesUncounted: a fleet replica's store size before its first
// listing of the bucket is no count (Usage.Uncounted): its steps are
// sampled with a null size, in the minute and hour series alike, where the
// series showed the replica's partial 0 as the bucket emptied; a step or
// an hour that also had a count keeps the count; and the snapshot's
// store counters keep the last count, marked uncounted.
func TestStoreSeriesUncounted(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	t0 := clock.Now() // minute 0 of hour 0
	var mu sync.Mutex
	u := Usage{Uncounted: true}
	set := func(v Usage) { mu.Lock(); defer mu.Unlock(); u = v }
	cfg := Config{Dir: dir, Now: clock.Now, FlushInterval: time.Hour,
		Usage: func() Usage { mu.Lock(); defer mu.Unlock(); return u }}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Snapshot(SnapshotOptions{}) // minute 0: not listed yet
	clock.Advance(time.Minute)
	s.Snapshot(SnapshotOptions{}) // minute 1: not listed yet, then listed
	set(Usage{Bytes: 500, Entries: 5})
	s.Snapshot(SnapshotOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute) // down in minute 2; restarted in minute 3, not listed yet
	set(Usage{Bytes: 7, Entries: 1, Uncounted: true})
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := s.Snapshot(SnapshotOptions{})
	if g := snap.StoreCounters; g.StoreBytes != 500 || g.StoreEntries != 5 || !g.Uncounted {
		t.Errorf("store counters %+v, want the last count (500 bytes, 5 entries), uncounted", g)
	}
	clock.Advance(time.Hour) // hour 1, minute 63: still not listed
	s.Snapshot(SnapshotOptions{})

	null := int64(-1)
	tests := []struct {
		name    string
		step    time.Duration
		at      int // index of the step
		bytes   int64
		sampled bool
	}{
		{"minute 0, not listed", time.Minute, 0, null, true},
		{"minute 1, listed during it", time.Minute, 1, 500, true},
		{"minute 2, down", time.Minute, 2, null, false},
		{"minute 3, restarted, not listed", time.Minute, 3, null, true},
		{"minute 63, not listed", time.Minute, 63, null, true},
		{"hour 0, listed in it", time.Hour, 0, 500, true},
		{"hour 1, not listed", time.Hour, 1, null, true},
	}
	for _, tt := range tests {
		ser, err := s.Series("", t0, tt.step)
		if err != nil {
			t.Fatal(err)
		}
		if tt.at >= len(ser.StoreBytes) || tt.at >= len(ser.Sampled) {
			t.Fatalf("%s: %d steps", tt.name, len(ser.StoreBytes))
		}
		got := null
		if p := ser.StoreBytes[tt.at]; p != nil {
			got = *p
		}
		if got != tt.bytes || ser.Sampled[tt.at] != tt.sampled {
			t.Errorf("%s: store_bytes %d, sampled %v; want %d (-1: null), sampled %v", tt.name, got, ser.Sampled[tt.at], tt.bytes, tt.sampled)
		}
	}
}
