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
