package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// TestSmallEntriesPastDiskBound streams small entries into a store, 1.5
// times what MaxBytes holds. Each small entry costs more on disk than its
// bytes (its metadata and blob records, keys, LSM tables), so a store full
// by its byte count holds more than its disk bound on disk, all of it live. Before,
// the disk bound then refused every Put (ErrReclaiming) for good: nothing
// was evicted for a Put the disk refused, and GC had nothing to reclaim:
// evicted entries' tombstones waited in a level above their values, so
// Badger counted none of it as garbage. Now GC flattens the LSM tree under
// pressure and the store evicts for the disk when GC finds nothing, so
// every Put succeeds after a few refusals, each followed by a GC pass, and
// the directory stays under its bound.
//
// DiskWait is negative and the test runs the GC passes itself
// (CollectGarbage), so that nothing depends on how fast the machine is.
func TestSmallEntriesPastDiskBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 24,576 entries")
	}
	const (
		limit   = 32 << 20
		size    = 2 << 10 // over ValueThreshold: in the value log
		entries = 3 * limit / size / 2
		tries   = 8
	)
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir, MaxBytes: limit, DiskWait: -1})
	defer s.Close()
	body := make([]byte, size)
	var maxSeen int64
	refused := 0
	for i := range entries {
		binary.LittleEndian.PutUint64(body, uint64(i))
		for try := 1; ; try++ {
			_, err := s.Put(context.Background(), "default", keyOf(fmt.Sprint(i)), bytes.NewReader(body), PutOptions{Size: size})
			if err == nil {
				break
			}
			if !errors.Is(err, ErrReclaiming) || try == tries {
				u := s.Usage()
				t.Fatalf("Put %d (try %d): %v; store holds %d entries, %d bytes, %d evictions, about %d bytes on disk",
					i, try, err, u.Entries, u.Bytes, u.Evictions, s.diskHeld())
			}
			refused++
			s.CollectGarbage()
		}
		if i%1000 == 0 {
			sc, err := scanDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			maxSeen = max(maxSeen, sc.bounded)
		}
	}
	u := s.Usage()
	t.Logf("%d entries of %d bytes under %d: %d refusals retried; %d entries (%d bytes) kept, %d evictions; directory at most %d bytes besides Badger's fixed files (bound %d)",
		entries, size, limit, refused, u.Entries, u.Bytes, u.Evictions, maxSeen, s.cfg.MaxDiskBytes)
	if maxSeen > s.cfg.MaxDiskBytes {
		t.Errorf("directory reached %d bytes, over the disk bound of %d", maxSeen, s.cfg.MaxDiskBytes)
	}
	if u.Bytes < limit/2 {
		t.Errorf("store kept %d bytes of its %d: evicting for the disk took too much", u.Bytes, limit)
	}
	if got, err := readAll(s, "default", keyOf(fmt.Sprint(entries-1)), 0); err != nil || len(got) != size {
		t.Errorf("last entry: %d bytes, %v", len(got), err)
	}
}

// TestSmallEntriesDiskPeak streams 2 KiB entries into a store, 1.5 times
// what MaxBytes holds, and measures the directory after every Put. Before,
// the estimate that admits Puts counted chunk bytes only, not what the LSM
// tree adds between scans: a memtable flush (a level-0 table at once) and
// the compaction after it, which writes the level below anew before it
// deletes the old tables. The directory peaked at 1.60 times MaxBytes (107
// MB here) against its bound of 1.25 (84 MB). Now the estimate keeps room
// for both (diskbound_lsm.go) and the directory stays under the bound
// (68 MB, 1.02 times, here).
//
// The flushes and compactions run on Badger's goroutines, so the peak may
// come at any moment: the test scans after every Put and the bound must
// hold at each.
func TestSmallEntriesDiskPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 49,152 entries")
	}
	const (
		limit   = 64 << 20
		size    = 2 << 10
		entries = 3 * limit / size / 2
	)
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir, MaxBytes: limit, DiskWait: -1})
	defer s.Close()
	body := make([]byte, size)
	var peak diskScan
	peakAt := -1
	for i := range entries {
		binary.LittleEndian.PutUint64(body, uint64(i))
		for try := 1; ; try++ {
			_, err := s.Put(context.Background(), "default", keyOf(fmt.Sprint(i)), bytes.NewReader(body), PutOptions{Size: size})
			if err == nil {
				break
			}
			if !errors.Is(err, ErrReclaiming) || try == 8 {
				t.Fatalf("Put %d (try %d): %v", i, try, err)
			}
			s.CollectGarbage()
		}
		sc, err := scanDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sc.bounded > peak.bounded {
			peak, peakAt = sc, i
		}
	}
	u := s.Usage()
	t.Logf("%d entries of %d bytes under %d: kept %d entries (%d bytes), %d evictions; directory at most %d bytes besides Badger's fixed files, %d of them tables, after Put %d (bound %d)",
		entries, size, limit, u.Entries, u.Bytes, u.Evictions, peak.bounded, peak.tables, peakAt, s.cfg.MaxDiskBytes)
	if peak.bounded > s.cfg.MaxDiskBytes {
		t.Errorf("directory reached %d bytes (%.2f times MaxBytes), over the disk bound of %d", peak.bounded, float64(peak.bounded)/limit, s.cfg.MaxDiskBytes)
	}
	if u.Bytes < limit/2 {
		t.Errorf("store kept %d bytes of its %d: the room kept for the LSM tree took too much", u.Bytes, limit)
	}
}
