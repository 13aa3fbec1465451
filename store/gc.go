package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxPassRewrites bounds the value-log files one background GC pass
// rewrites; a pass that reaches it asks for another, so writes and Close
// get their turn in between.
const maxPassRewrites = 8

// gcLoop runs a GC pass every Config.GCInterval and whenever kicked
// (evictions freed a value-log file's worth, or a Put waits for the disk
// bound: diskbound.go).
func (s *Badger) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.gcKick:
		}
		start := time.Now()
		n := s.maintain(10*time.Second, maxPassRewrites, false)
		if n >= maxPassRewrites {
			s.kickGC()
		}
		s.passDone()
		s.log.Debug("gc pass", "rewrote", n, "took", time.Since(start), "disk_estimate", s.diskHeld())
	}
}

// minDiscardRatio is the lowest discard ratio runGC goes down to while the
// directory presses on its disk bound.
const minDiscardRatio = 0.05

// runGC runs value-log GC until it finds nothing more to rewrite or has
// rewritten limit files (limit <= 0: no limit), and reports how many it
// rewrote and whether it stopped because nothing was left to rewrite
// (rather than at the limit, on an error or on a concurrent pass). Each
// rewrite pauses writes (gcMu), never reads; the disk is rescanned after
// each.
//
// While the directory presses on its disk bound (diskPressed), a file with
// less garbage than Config.GCDiscardRatio is rewritten too, halving the
// ratio down to minDiscardRatio: rewriting moves a file's live values to
// the head of the log among new ones, so after a while evicted bytes are
// spread thinly over many files and none reaches the configured ratio.
func (s *Badger) runGC(limit int) (n int, dry bool) {
	ratio := s.cfg.GCDiscardRatio
	for limit <= 0 || n < limit {
		if s.enter() != nil {
			return n, false
		}
		s.gcMu.Lock()
		err := s.db.RunValueLogGC(ratio)
		s.gcMu.Unlock()
		s.leave()
		if err == nil {
			n++
			if s.diskBounded() {
				s.rescanDisk()
			}
			continue
		}
		if errors.Is(err, badger.ErrNoRewrite) && ratio > minDiscardRatio && s.diskPressed() {
			ratio = max(ratio/2, minDiscardRatio)
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			s.log.Warn("value log gc failed", "err", err)
		}
		return n, errors.Is(err, badger.ErrNoRewrite)
	}
	return n, false
}

// CollectGarbage returns the disk space of deleted and evicted blobs now
// (it also runs every Config.GCInterval) and reports how many value-log files
// it rewrote.
func (s *Badger) CollectGarbage() int { return s.maintain(time.Minute, 0, true) }

// maintain makes deleted chunks' value-log space reclaimable and reclaims it.
//
// Badger's value-log GC only rewrites files that its discard statistics say
// are mostly garbage, and it learns that only when compaction drops the old
// versions of deleted keys. Chunk keys are tiny (their values live in the
// value log), so the memtable holding their tombstones could take hundreds of
// gigabytes of writes to fill and flush. So when chunks were deleted since
// the last pass, maintain pauses writes for a moment (gcMu; reads go on),
// flushes the memtables (DropPrefix of a marker key does exactly that), lets
// the compactors push the new L0 table down (one L0 table triggers it), then
// runs value-log GC until nothing is left to rewrite or it has rewritten
// limit files (limit <= 0: no limit).
//
// maintain waits up to compactWait for the compaction.
//
// When that rewrites nothing while the directory presses on its disk bound,
// maintain flattens the LSM tree and runs GC again (at most once a second,
// once in flattenIdle after a flatten that found nothing, always when
// explicit: CollectGarbage). A deleted key's tombstone counts its
// value as garbage only when a compaction meets the value's own version,
// and between them can lie a level that no compaction empties until it
// outgrows its target: a store of small entries evicted 64 MiB of entries
// whose tombstones all waited in level 5 above their values in level 6,
// discard statistics empty, and GC rewrote nothing. If flattening finds
// nothing either, everything on disk is live and the pass sets
// gcExhausted, so that the next Put the disk bound refuses evicts
// (evictForDisk).
func (s *Badger) maintain(compactWait time.Duration, limit int, explicit bool) int {
	// Flushing memtables, GC's rewrites and flattening all create files.
	if err := s.writable(); err != nil {
		s.skipWrite("value-log gc", "deleted and evicted entries' disk space is returned once it is", err)
		return 0
	}
	flush, wide := s.garbageChunks.Swap(0) > 0, false
	if !flush && s.diskPressed() && time.Since(time.Unix(0, s.lastWide.Load())) >= time.Second {
		// Pressed with no new garbage: what is left was counted by no
		// compaction (a reader's snapshot kept it alive when it ran). A
		// level-0 table spanning every key makes the next compaction
		// rewrite the whole last level and count it. At most once a second.
		flush, wide = true, true
		s.lastWide.Store(time.Now().UnixNano())
	}
	if flush {
		t0 := time.Now()
		if err := s.flushMemtables(wide); err != nil {
			if errors.Is(err, ErrClosed) {
				return 0
			}
			s.log.Warn("flush memtables for gc failed", "err", err)
		}
		t1 := time.Now()
		s.waitL0Compacted(compactWait)
		s.log.Debug("gc flush", "wide", wide, "flush", t1.Sub(t0), "compact", time.Since(t1))
	}
	n, dry := s.runGC(limit)
	if n > 0 || !dry || !s.diskPressed() {
		s.gcExhausted.Store(false)
		return n
	}
	if explicit || time.Now().UnixNano() >= s.flattenAfter.Load() {
		t0 := time.Now()
		if err := s.flatten(); err != nil {
			if errors.Is(err, ErrClosed) {
				return 0
			}
			s.log.Warn("flatten the LSM tree for gc failed", "err", err)
		}
		n, dry = s.runGC(limit)
		// It rewrites the whole LSM tree (about 450 bytes per small entry).
		// One that let GC reclaim may be needed again soon, as evictions
		// go on; one that found nothing waits flattenIdle, unless
		// evictForDisk makes new garbage first: a directory pinned full by
		// an open reader must not be flattened every second.
		next := time.Second
		if n == 0 {
			next = flattenIdle
		}
		s.flattenAfter.Store(time.Now().Add(next).UnixNano())
		s.log.Debug("gc flatten", "took", time.Since(t0), "rewrote", n)
	}
	s.gcExhausted.Store(n == 0 && dry && s.diskPressed())
	return n
}

// flattenIdle is how long maintain waits to flatten again after a flatten
// that let GC reclaim nothing, unless evictForDisk evicts in between.
const flattenIdle = 30 * time.Second

// flatten compacts every level of Badger's LSM tree into the last, where
// compaction counts the value-log bytes of every deleted key as garbage
// (discard statistics) and drops its tombstone. Writes go on; Badger's own
// compactions wait for it.
func (s *Badger) flatten() error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.lsmMu.Lock()
	defer s.lsmMu.Unlock()
	if err := s.db.Flatten(1); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	return nil
}

// flushKey is written and dropped to make Badger flush its memtables.
// spanKeys sort before and after every other key (records.go); written
// before a flush, they make the level-0 table overlap every table below.
var (
	flushKey = []byte("x/flush")
	spanKeys = [][]byte{[]byte("a/gc"), []byte("x/gc")}
)

// flushMemtables makes Badger flush its memtables to level 0. DropPrefix
// refuses concurrent writes (ErrBlockedWrites), so writes pause (gcMu);
// reads go on.
func (s *Badger) flushMemtables(wide bool) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.lsmMu.Lock()
	defer s.lsmMu.Unlock()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if err := s.db.Update(func(txn *badger.Txn) error {
		if wide {
			for _, k := range spanKeys {
				if err := txn.Set(k, nil); err != nil {
					return err
				}
			}
		}
		return txn.Set(flushKey, nil)
	}); err != nil {
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
