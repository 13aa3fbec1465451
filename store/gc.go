package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func (s *Badger) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.maintain(10 * time.Second)
		}
	}
}

// runGC runs value-log GC until it finds nothing more to rewrite.
func (s *Badger) runGC() int {
	n := 0
	for {
		if s.enter() != nil {
			return n
		}
		s.gcMu.Lock()
		err := s.db.RunValueLogGC(s.cfg.GCDiscardRatio)
		s.gcMu.Unlock()
		s.leave()
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn("value log gc failed", "err", err)
			}
			return n
		}
		n++
	}
}

// CollectGarbage returns the disk space of deleted and evicted blobs now
// (it also runs every Config.GCInterval) and reports how many value-log files
// it rewrote.
func (s *Badger) CollectGarbage() int { return s.maintain(time.Minute) }

// maintain makes deleted chunks' value-log space reclaimable and reclaims it.
//
// Badger's value-log GC only rewrites files that its discard statistics say
// are mostly garbage, and it learns that only when compaction drops the old
// versions of deleted keys. Chunk keys are tiny (their values live in the
// value log), so the memtable holding their tombstones could take hundreds of
// gigabytes of writes to fill and flush. So when chunks were deleted since
// the last pass, maintain pauses operations for a moment (closeMu), flushes
// the memtables (DropPrefix of a marker key does exactly that), lets the
// compactors push the new L0 table down (one L0 table triggers it), then runs
// value-log GC until nothing is left to rewrite.
//
// maintain waits up to compactWait for the compaction.
func (s *Badger) maintain(compactWait time.Duration) int {
	if s.garbageChunks.Swap(0) > 0 {
		if err := s.flushMemtables(); err != nil {
			if errors.Is(err, ErrClosed) {
				return 0
			}
			s.log.Warn("flush memtables for gc failed", "err", err)
		}
		s.waitL0Compacted(compactWait)
	}
	return s.runGC()
}

// flushKey is written and dropped to make Badger flush its memtables.
var flushKey = []byte("x/flush")

func (s *Badger) flushMemtables() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(flushKey, nil) }); err != nil {
		return fmt.Errorf("write flush marker: %w", err)
	}
	if err := s.db.DropPrefix(flushKey); err != nil {
		return fmt.Errorf("flush memtables: %w", err)
	}
	return nil
}

// waitL0Compacted waits until level 0 is empty or the timeout passes.
func (s *Badger) waitL0Compacted(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s.enter() != nil {
			return
		}
		l0 := 0
		for _, l := range s.db.Levels() {
			if l.Level == 0 {
				l0 = l.NumTables
			}
		}
		s.leave()
		if l0 == 0 {
			return
		}
		select {
		case <-s.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
