package stats

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestStoreSeriesSaysNoSample: the store series holds null, not 0, for the
// minutes the server was down, and its sampled flags say which steps had
// no sample; a store emptied to 0 bytes reads 0; an unchanged store has a
// sample every minute; and the records of a build that wrote one only
// when a figure changed still read as the size carried forward.
func TestStoreSeriesSaysNoSample(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	t0 := clock.Now() // minute 0
	var mu sync.Mutex
	u := Usage{Bytes: 100, Entries: 1, Namespaces: map[string]int64{"team-a": 100}}
	setBytes := func(b int64) {
		mu.Lock()
		defer mu.Unlock()
		u.Bytes = b
		u.Namespaces = map[string]int64{"team-a": b}
	}
	cfg := Config{Dir: dir, Now: clock.Now, FlushInterval: time.Hour,
		Usage: func() Usage { mu.Lock(); defer mu.Unlock(); return u }}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("team-a")
	// An older build's record, written when the size last changed three
	// minutes before this build first ran: 70 bytes.
	old, _ := json.Marshal(Global{StoreBytes: 70, NamespaceBytes: map[string]int64{"team-a": 70}})
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(bucketKey(pGMinute, t0.Unix()/60-3, "", ""), old)
	}); err != nil {
		t.Fatal(err)
	}
	s.Snapshot(SnapshotOptions{}) // minute 0: 100 bytes
	clock.Advance(time.Minute)
	s.Snapshot(SnapshotOptions{}) // minute 1: unchanged
	clock.Advance(time.Minute)
	setBytes(0) // minute 2: emptied
	s.Snapshot(SnapshotOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Minute) // down in minutes 3 and 4
	setBytes(50)
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Snapshot(SnapshotOptions{}) // minute 5: 50 bytes
	clock.Advance(30 * time.Second)

	// Steps from minute -5 to minute 5.
	want := []string{"null", "null", "70", "70", "70", "100", "100", "0", "null", "null", "50"}
	wantSampled := []bool{true, true, true, true, true, true, true, true, false, false, true}
	for _, ns := range []string{"", "team-a"} {
		ser, err := s.Series(ns, t0.Add(-5*time.Minute), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(ser)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Time       []int64  `json:"t"`
			StoreBytes []*int64 `json:"store_bytes"`
			Sampled    []bool   `json:"sampled"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Time) != len(want) || len(got.StoreBytes) != len(want) {
			t.Fatalf("namespace %q: %d steps, %d store_bytes; want %d of each", ns, len(got.Time), len(got.StoreBytes), len(want))
		}
		if len(got.Sampled) != len(want) {
			t.Errorf("namespace %q: %d sampled flags, want one a step (%d)", ns, len(got.Sampled), len(want))
			got.Sampled = make([]bool, len(want))
		}
		for i := range want {
			minute := (got.Time[i] - t0.Unix()) / 60
			v := "null"
			if got.StoreBytes[i] != nil {
				v = fmt.Sprint(*got.StoreBytes[i])
			}
			if v != want[i] || got.Sampled[i] != wantSampled[i] {
				t.Errorf("namespace %q minute %d: store_bytes %s sampled %v, want %s sampled %v", ns, minute, v, got.Sampled[i], want[i], wantSampled[i])
			}
		}
	}
}
