package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrReclaiming means the store's directory is at its disk bound
// (Config.MaxDiskBytes) while value-log GC returns evicted bytes to the
// disk; nothing was stored. It wraps ErrFull, so callers that only know
// ErrFull still answer "full" (the api answers 507 with Retry-After).
// Retrying in a moment usually succeeds.
var ErrReclaiming = fmt.Errorf("disk is at the store's bound while garbage collection reclaims evicted entries; retry shortly: %w", ErrFull)

// The disk bound.
//
// Badger does not return a deleted value's bytes to the disk when it is
// deleted: the value stays in its value-log file until compaction has
// counted the file's garbage (discard statistics) and value-log GC has
// rewritten the file's live values forward and deleted it. So under
// MaxBytes alone, a burst of uploads that evicts as fast as it writes grows
// the directory by everything it evicts until GC catches up.
//
// The store bounds it two ways. It reclaims as it evicts: every
// ValueLogFileSize of chunks deleted kicks a GC pass (gc.go) instead of
// waiting for the next GCInterval, and value-log files are sized from
// MaxBytes so one rewrite reclaims a small step. And it admits no new bytes
// past the bound: before a Put's reservation evicts anything, the bytes
// about to be written must fit under MaxDiskBytes less a headroom; when they
// do not, the Put waits up to DiskWait for GC passes, then fails with
// ErrReclaiming.
//
// What the bound counts (diskScan.bounded) is the apparent size of every
// file at the top of Dir except Badger's fixed files: the memtables'
// write-ahead logs (*.mem: at most NumMemtables+1 of 2×MemTableSize each),
// DISCARD (1 MiB), KEYREGISTRY, MANIFEST and LOCK. Those are allocated at a
// size of their own, whatever the store holds. Subdirectories belong to
// other components (the stats database, the plugin compilation cache, the
// shared tier's spool and queue) and are not counted.
//
// The estimate between scans is the last scan plus the chunk bytes written
// since, plus the bytes reserved by uploads in flight that they have not
// written yet, plus room for what the LSM tree is about to add: memtable
// flushes and the rewrites of compaction (diskbound_lsm.go). The headroom (2×ValueLogFileSize) covers what the estimate
// cannot see: a new value-log file appears preallocated at twice its size
// (sparse), and a GC rewrite writes a file's live values before it deletes
// the file.
//
// A store of small entries needs more: each entry takes more disk than its
// bytes (about 500 bytes of records, keys and LSM tables besides a 2 KiB
// entry's 2 KiB), so the directory reaches the bound with live entries
// alone before MaxBytes evicts anything, and GC has nothing to reclaim.
// Then a GC pass that finds nothing under pressure flattens the LSM tree
// (gc.go), and if that finds nothing either, the next Put the bound refuses
// evicts least recently used entries (evictForDisk) for GC to reclaim: the
// store settles below MaxBytes, at what fits on disk.

// fixedDiskFile reports whether name is one of Badger's fixed files.
func fixedDiskFile(name string) bool {
	switch name {
	case "DISCARD", "KEYREGISTRY", "MANIFEST", "LOCK":
		return true
	}
	return strings.HasSuffix(name, ".mem")
}

// diskScan is one look at the files of the store's directory.
type diskScan struct {
	// bounded is the apparent size of the files MaxDiskBytes bounds (value
	// log, tables, anything else at the top of Dir but the fixed files).
	bounded int64
	// fixed is the apparent size of Badger's fixed files.
	fixed int64
	// allocated is the disk space of every file at the top of Dir (blocks
	// allocated, as du counts them; sparse preallocation is not counted).
	allocated int64
	// tables is the apparent size of the LSM tree's tables (*.sst), part
	// of bounded.
	tables int64
	// memLow and memHigh are the lowest and highest ids of the memtables'
	// write-ahead logs (NNNNN.mem), -1 when there are none: a memtable is
	// flushed when its log goes (lsmRoom).
	memLow, memHigh int64
}

// scanDir measures the regular files at the top of dir.
func scanDir(dir string) (diskScan, error) {
	sc := diskScan{memLow: -1, memHigh: -1}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sc, fmt.Errorf("scan store directory: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted since ReadDir
		}
		if fixedDiskFile(e.Name()) {
			sc.fixed += info.Size()
			sc.noteMemtable(e.Name())
		} else {
			sc.bounded += info.Size()
			if strings.HasSuffix(e.Name(), ".sst") {
				sc.tables += info.Size()
			}
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			sc.allocated += st.Blocks * 512
		} else {
			sc.allocated += info.Size()
		}
	}
	return sc, nil
}

// diskState is the store's view of its directory between scans.
type diskState struct {
	mu        sync.Mutex
	scan      diskScan
	scannedAt time.Time
	// written counts chunk bytes handed to Badger since the scan began.
	written int64
	// inflight counts chunk bytes written by uploads whose reservation is
	// still held (acct.reserved counts them too).
	inflight int64

	// evictedAt is the scan's bounded bytes when evictForDisk last evicted
	// (0: never), lowSince the lowest scan since then, and unshrunk the
	// steps it evicted in a row without a scan seeing the directory shrink
	// in between (mayEvictForDisk).
	evictedAt, lowSince int64
	unshrunk            int

	// lsm estimates what the LSM tree will add to the directory
	// (diskbound_lsm.go).
	lsm lsmState

	// passMu guards pass, closed and replaced at the end of every GC pass.
	passMu sync.Mutex
	pass   chan struct{}
}

// diskRescanEvery bounds how often admission rescans the directory.
const diskRescanEvery = 10 * time.Millisecond

// diskBounded reports whether the store enforces MaxDiskBytes.
func (s *Badger) diskBounded() bool { return s.cfg.MaxDiskBytes > 0 }

// diskAdmitLimit is the most bounded bytes admission lets the estimate reach.
func (s *Badger) diskAdmitLimit() int64 {
	return s.cfg.MaxDiskBytes - 2*s.cfg.ValueLogFileSize
}

// rescanDisk measures the directory now.
func (s *Badger) rescanDisk() {
	s.disk.mu.Lock()
	before := s.disk.written
	s.disk.mu.Unlock()
	sc, err := scanDir(s.cfg.Dir)
	if err != nil {
		level := slog.LevelWarn
		if s.DirErr() != nil {
			// A directory gone or not writable: watchDir says so once
			// at ERROR; this ran up to once a second for as long.
			level = slog.LevelDebug
		}
		s.log.Log(context.Background(), level, "measure the store's disk use", "err", err)
		return
	}
	s.mu.Lock()
	live := s.acct.live
	s.mu.Unlock()
	s.disk.mu.Lock()
	s.disk.lsm.observe(sc, live)
	s.disk.scan, s.disk.scannedAt = sc, time.Now()
	s.disk.written -= before
	s.disk.lowSince = min(s.disk.lowSince, sc.bounded)
	s.disk.mu.Unlock()
}

// diskWrote records n chunk bytes handed to Badger; upload says whether an
// upload's reservation still counts them (settled by diskSettle).
func (s *Badger) diskWrote(n int64, upload bool) {
	s.disk.mu.Lock()
	s.disk.written += n
	if upload {
		s.disk.inflight += n
	}
	s.disk.mu.Unlock()
}

// diskSettle forgets n bytes an upload wrote, before its reservation is
// released (so the estimate counts them twice for a moment, never zero
// times).
func (s *Badger) diskSettle(n int64) {
	if n == 0 {
		return
	}
	s.disk.mu.Lock()
	s.disk.inflight -= n
	s.disk.mu.Unlock()
}

// diskEstimate returns the bounded bytes the directory holds or is about to
// (see the comment on the disk bound above) given the bytes reserved by
// uploads in flight, and whether the last scan is stale. The caller holds mu
// (lock order: mu, then disk.mu).
func (s *Badger) diskEstimate(reserved int64) (int64, bool) {
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	est := s.disk.scan.bounded + s.disk.written + reserved - s.disk.inflight + s.disk.lsm.room(s.disk.scan)
	return est, time.Since(s.disk.scannedAt) >= diskRescanEvery
}

// diskAdmits reports whether n more bytes may be written now. The caller
// holds wmu, so no other reservation is made meanwhile.
func (s *Badger) diskAdmits(n int64) bool {
	if !s.diskBounded() || n == 0 {
		return true
	}
	limit := s.diskAdmitLimit()
	for rescanned := false; ; rescanned = true {
		s.mu.Lock()
		est, stale := s.diskEstimate(s.acct.reserved)
		s.mu.Unlock()
		if est+n <= limit {
			return true
		}
		if rescanned || !stale {
			return false
		}
		s.rescanDisk()
	}
}

// diskHeld returns the estimate of the bounded bytes, for messages.
func (s *Badger) diskHeld() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	est, _ := s.diskEstimate(s.acct.reserved)
	return est
}

// diskPressed reports whether the directory is within 2×ValueLogFileSize
// of the admission limit, where GC rewrites files with less garbage
// (runGC).
func (s *Badger) diskPressed() bool {
	return s.diskBounded() && s.diskHeld() > s.diskAdmitLimit()-2*s.cfg.ValueLogFileSize
}

// errDiskBusy is reserveOnce's answer when the disk bound refuses for now.
var errDiskBusy = errors.New("disk bound reached")

// waitForDisk kicks a GC pass and waits for it (or DiskWait, ctx, Close).
// It reports false when the wait is over and the Put should give up.
func (s *Badger) waitForDisk(ctx context.Context, deadline time.Time) bool {
	if !time.Now().Before(deadline) {
		return false
	}
	s.disk.passMu.Lock()
	pass := s.disk.pass
	s.disk.passMu.Unlock()
	s.kickGC()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-pass:
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-s.stop:
		return false
	}
	// Let the files GC deleted show; never spin faster than rescans.
	select {
	case <-time.After(diskRescanEvery):
	case <-s.stop:
		return false
	}
	return true
}

// passDone wakes the Puts waiting for a GC pass.
func (s *Badger) passDone() {
	s.rescanDisk()
	s.disk.passMu.Lock()
	close(s.disk.pass)
	s.disk.pass = make(chan struct{})
	s.disk.passMu.Unlock()
}

// kickGC asks the GC loop for a pass now; it never blocks.
func (s *Badger) kickGC() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// diskBytes returns the disk space the store's files occupy, rescanning
// when the last scan is over a second old.
func (s *Badger) diskBytes() int64 {
	s.disk.mu.Lock()
	stale := time.Since(s.disk.scannedAt) >= time.Second
	s.disk.mu.Unlock()
	if stale && s.enter() == nil {
		s.rescanDisk()
		s.leave()
	}
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	return s.disk.scan.allocated
}

// evictForDisk evicts least recently used entries (reason size) whose
// bytes add up to diskEvictStep, for a Put the disk bound refuses while GC
// found nothing left to reclaim (gcExhausted). A small entry costs more on
// disk than its bytes (its metadata and blob records, keys and LSM tables:
// about 500 bytes for a 2 KiB entry), so a store of small entries fills its
// disk bound with live data before MaxBytes evicts anything; without this,
// every Put was refused from then on, for good. The GC pass the refused Put
// waits for reclaims what this evicted, and the Put is admitted. The
// caller holds wmu and, after releasing it, runs the purges and then
// notifyEvicted.
func (s *Badger) evictForDisk() (purges []func(), gone []evicted, err error) {
	var freed int64
	n := 0
	for step := s.diskEvictStep(); freed < step; n++ {
		s.mu.Lock()
		ref, ok := s.acct.oldest()
		before := s.acct.bytes
		s.mu.Unlock()
		if !ok {
			break
		}
		purge, e, err := s.evictLocked(ref, evictSize)
		if err != nil {
			return purges, gone, err
		}
		purges = append(purges, purge)
		if s.cfg.OnEvict != nil {
			gone = append(gone, e)
		}
		s.mu.Lock()
		// A blob another entry shares frees nothing; count the entry
		// anyway, so that the loop ends.
		freed += max(before-s.acct.bytes, 1)
		s.mu.Unlock()
	}
	s.rescanDisk()
	s.disk.mu.Lock()
	if s.disk.evictedAt != 0 && s.disk.lowSince >= s.disk.evictedAt {
		s.disk.unshrunk++
	} else {
		s.disk.unshrunk = 1
	}
	s.disk.evictedAt, s.disk.lowSince = s.disk.scan.bounded, s.disk.scan.bounded
	s.disk.mu.Unlock()
	// The next GC pass must flatten at once to count what this evicted
	// (maintain), not wait out its rate limit while Puts wait.
	s.flattenAfter.Store(0)
	s.log.Info("evicted to make room on disk: the store's entries take more disk than their bytes (small entries)",
		"entries", n, "freed_bytes", freed, "disk_bound", s.cfg.MaxDiskBytes, "max_bytes", s.cfg.MaxBytes)
	s.kickGC()
	return purges, gone, nil
}

// diskPerEntry is about what an entry takes on disk besides its bytes
// (metadata and blob records, keys, LSM tables: 450-670 bytes measured for
// 2 KiB entries), for mayEvictForDisk's plausibility check.
const diskPerEntry = 512

// mayEvictForDisk reports whether evicting can make room on disk for a Put
// the disk bound refuses while GC finds nothing to reclaim. Not when the
// directory holds more than 1.5 times what the entries could take (their
// bytes plus diskPerEntry each): the rest is garbage that GC has rewritten
// but may not delete yet (an open reader pins the files), and evicting
// would lose entries without freeing any disk. And not more than
// maxUnshrunkSteps steps in a row unless a scan has seen the directory
// shrink since the last: evicting is for a directory full of live entries,
// where GC then returns the disk, and must not empty a store whose disk
// does not come back. (One step may free nothing at once, as when the
// evicted values sit in the value-log file Badger is writing, which its GC
// never rewrites.)
func (s *Badger) mayEvictForDisk() bool {
	s.mu.Lock()
	live := s.acct.bytes + int64(s.acct.live)*diskPerEntry
	held, _ := s.diskEstimate(s.acct.reserved)
	s.mu.Unlock()
	if held > live+live/2 {
		s.log.Debug("not evicting for the disk: the directory holds garbage GC cannot reclaim yet", "disk_estimate", held, "live_estimate", live)
		return false
	}
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	if s.disk.evictedAt != 0 && s.disk.lowSince >= s.disk.evictedAt && s.disk.unshrunk >= maxUnshrunkSteps {
		s.log.Debug("not evicting for the disk again: it has not shrunk since", "evicted_at", s.disk.evictedAt, "lowest_since", s.disk.lowSince, "steps", s.disk.unshrunk)
		return false
	}
	return true
}

// maxUnshrunkSteps bounds the steps evictForDisk evicts in a row while the
// directory does not shrink (mayEvictForDisk).
const maxUnshrunkSteps = 2

// diskEvictStep is how many bytes of entries evictForDisk evicts at once:
// a sixteenth of MaxBytes, at least a value-log file. Each step costs a GC
// pass that flattens the LSM tree (gc.go, maintain), so steps are not
// made smaller.
func (s *Badger) diskEvictStep() int64 {
	return max(s.cfg.MaxBytes/16, s.cfg.ValueLogFileSize)
}
