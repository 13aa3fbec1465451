package store

import (
	"strconv"
	"strings"
)

// What the LSM tree adds to the directory between scans.
//
// A scan sees the tables on disk, not what Badger is about to write: the
// memtables' contents, which a flush turns into a level-0 table at once, and
// the compactions that follow. A compaction writes its new tables before it
// deletes the old ones, and the store's own GC makes level-0 tables span
// every key (gc.go, spanKeys), so merging one into the level below rewrites
// that whole level: for a moment the tables take twice their size. With
// 2 KiB entries the tables are about a sixth of the directory, and the
// estimate, which counted only chunk bytes, let the directory peak at
// 1.3-1.6 times MaxBytes against a bound of 1.25 (BENCHMARKS.md, "Small
// entries at the disk bound"; TestSmallEntriesDiskPeak).
//
// So the estimate keeps room for both (lsmState.room): the tables' size
// again, for a rewrite, and twice what the unflushed memtables will add
// (their flush, and its rewrite by the next compaction). What a memtable
// will add is charged per entry written or deleted (diskIndexed), at the
// table bytes per live entry observed at the last scan, and forgotten when
// a scan sees that memtable's write-ahead log gone (flushed). For large
// entries the tables are a few bytes per megabyte and the room is nothing
// to speak of.

// lsmPerEntryFloor is the charge per entry before the directory has tables
// to measure: about what a 2 KiB entry's records take in a table (360-450
// bytes measured), rounded up.
const lsmPerEntryFloor = 512

// lsmState is the disk bound's view of the LSM tree; disk.mu guards it.
type lsmState struct {
	// perEntry is the table bytes per live entry at the last scan (at
	// least lsmPerEntryFloor until the directory has tables).
	perEntry int64
	// charged counts the bytes charged for entries written or deleted
	// since the store opened.
	charged int64
	// since maps each memtable write-ahead log the last scan saw to
	// charged when a scan first saw it: the charges from then on went to
	// that memtable or a later one. Its size is bounded by Badger's
	// memtables (NumMemtables plus the one being written).
	since map[int64]int64
}

// noteMemtable records a memtable write-ahead log's id (NNNNN.mem).
func (sc *diskScan) noteMemtable(name string) {
	id, ok := strings.CutSuffix(name, ".mem")
	if !ok {
		return
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return
	}
	if sc.memLow < 0 || n < sc.memLow {
		sc.memLow = n
	}
	sc.memHigh = max(sc.memHigh, n)
}

// observe updates the state from a new scan of a store holding live
// entries.
func (l *lsmState) observe(sc diskScan, live int) {
	l.perEntry = lsmPerEntryFloor
	if sc.tables > 0 && live > 0 {
		l.perEntry = max(sc.tables/int64(live), 1)
	}
	if l.since == nil {
		l.since = make(map[int64]int64)
	}
	for id := range l.since {
		if id < sc.memLow || sc.memLow < 0 {
			delete(l.since, id) // flushed: its table is in sc.tables
		}
	}
	if sc.memHigh >= 0 {
		if _, ok := l.since[sc.memHigh]; !ok {
			l.since[sc.memHigh] = l.charged
		}
	}
}

// charge counts one entry written or deleted.
func (l *lsmState) charge() {
	if l.perEntry == 0 {
		l.perEntry = lsmPerEntryFloor
	}
	l.charged += l.perEntry
}

// pending returns the bytes charged to memtables not flushed at the last
// scan.
func (l *lsmState) pending(sc diskScan) int64 {
	from, ok := l.since[sc.memLow]
	if !ok {
		// The oldest memtable was there when the store opened (replayed
		// from its log) or was seen first by this scan: count from the
		// earliest known.
		from = l.charged
		for _, c := range l.since {
			from = min(from, c)
		}
	}
	return l.charged - from
}

// room returns the bytes the estimate keeps for the LSM tree beyond the
// scan (see above).
func (l *lsmState) room(sc diskScan) int64 {
	return sc.tables + 2*l.pending(sc)
}

// diskIndexed charges the LSM tree's share of one entry written or deleted.
func (s *Badger) diskIndexed() {
	if !s.diskBounded() {
		return
	}
	s.disk.mu.Lock()
	s.disk.lsm.charge()
	s.disk.mu.Unlock()
}
