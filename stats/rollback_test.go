package stats

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestStoreSeriesAfterRollback: a data directory this build wrote (g/s
// set), then served by an older build rolled back onto it, then by this
// build again. The older build writes a store record only when a figure
// changes and without "sampled", so the minutes it served must read as
// its records always did (the size carried forward, sampled), not as
// minutes the server was down.
func TestStoreSeriesAfterRollback(t *testing.T) {
	tests := []struct {
		name string
		// older is the minute (from t0) of the older build's one record;
		// -1: it wrote none (it ran with the store unchanged).
		older       int64
		want        []string
		wantSampled []bool
	}{
		{
			name:  "older build wrote a record",
			older: 3,
			// minutes 0-1 this build, 2-5 the older build (a change
			// at 3), 6 this build again
			want:        []string{"100", "100", "100", "70", "70", "70", "50"},
			wantSampled: []bool{true, true, true, true, true, true, true},
		},
		{
			// Nothing tells such a run from downtime: documented in
			// README "Upgrading and rolling back".
			name:        "older build wrote nothing",
			older:       -1,
			want:        []string{"100", "100", "null", "null", "null", "null", "50"},
			wantSampled: []bool{true, true, false, false, false, false, true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			t0 := clock.Now()
			var mu sync.Mutex
			u := Usage{Bytes: 100, Entries: 1}
			cfg := Config{Dir: t.TempDir(), Now: clock.Now, FlushInterval: time.Hour,
				Usage: func() Usage { mu.Lock(); defer mu.Unlock(); return u }}
			s, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.Snapshot(SnapshotOptions{}) // minute 0
			clock.Advance(time.Minute)
			s.Snapshot(SnapshotOptions{}) // minute 1
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.older >= 0 {
				// The older build's record, as 557bbaf writes it.
				old, _ := json.Marshal(struct {
					StoreBytes   int64 `json:"store_bytes"`
					StoreEntries int64 `json:"store_entries"`
				}{70, 1})
				db, err := badger.Open(badger.DefaultOptions(cfg.Dir).WithLogger(nil))
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(func(txn *badger.Txn) error {
					return txn.Set(bucketKey(pGMinute, t0.Unix()/60+tc.older, "", ""), old)
				}); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(5 * time.Minute) // minute 6
			mu.Lock()
			u.Bytes = 50
			mu.Unlock()
			s, err = Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.Snapshot(SnapshotOptions{})
			clock.Advance(30 * time.Second)

			ser, err := s.Series("", t0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(ser.StoreBytes) != len(tc.want) {
				t.Fatalf("%d steps, want %d", len(ser.StoreBytes), len(tc.want))
			}
			for i := range tc.want {
				v := "null"
				if ser.StoreBytes[i] != nil {
					v = fmt.Sprint(*ser.StoreBytes[i])
				}
				if v != tc.want[i] || ser.Sampled[i] != tc.wantSampled[i] {
					t.Errorf("minute %d: store_bytes %s sampled %v, want %s sampled %v", i, v, ser.Sampled[i], tc.want[i], tc.wantSampled[i])
				}
			}
		})
	}
}
