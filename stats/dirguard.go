package stats

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// DirErr reports whether the statistics directory can take a flush: nil,
// or an error that reads "the statistics directory DIR is gone or not
// writable: ...", while it is gone or the process may not write it (a
// chmod, a read-only remount of --data or of the directory alone). Badger
// needs the directory when a memtable fills; where it cannot create the
// next one it fails for good and ends the process at the next write (see
// store.Badger.DirErr), so a flush looks first; and Close then never
// returns (it retries its flush into the directory every second), so a
// caller that must not hang looks before it closes. An access(2), no I/O;
// in memory there is nothing to look at.
func (s *Stats) DirErr() error {
	if s.cfg.Dir == "" {
		return nil
	}
	if err := unix.Access(s.cfg.Dir, unix.W_OK); err != nil {
		return fmt.Errorf("the statistics directory %s is gone or not writable: %w", s.cfg.Dir, &os.PathError{Op: "access", Path: s.cfg.Dir, Err: err})
	}
	return nil
}

// noteDir logs a change in what flush found the directory to be, once:
// WARN when it cannot save, INFO when it saves again. Guarded by flushMu.
func (s *Stats) noteDir(err error) {
	switch {
	case err != nil && !s.dirBroken:
		s.droppedWarned = false // a new spell: trimUnsaved says it again
		s.cfg.Logger.Warn("statistics are counted in memory and not saved while their directory is not writable: make it writable again (they are saved at the next flush), or they are lost at exit", "err", err)
	case err == nil && s.dirBroken:
		s.cfg.Logger.Info("the statistics directory is writable again; statistics are saved", "dir", s.cfg.Dir,
			"minutes_dropped", s.unsavedDropped.Load())
	}
	s.dirBroken = err != nil
}

// DefaultMaxUnsavedMinutes is the default Config.MaxUnsavedMinutes: an
// hour of per-minute series waits in memory for a directory made writable
// again. Each minute holds a record per namespace × backend that was busy
// in it (at most MaxNamespaces × MaxBackends) and one of the store's
// figures, so unbounded, a replica whose disk stayed read-only for a
// weekend grew by every minute of it.
const DefaultMaxUnsavedMinutes = 60

// trimUnsaved drops, while flushes cannot save, the per-minute deltas older
// than the last Config.MaxUnsavedMinutes minutes before now, counting them
// (UnsavedMinutesDropped) and saying so at WARN the first time in each
// spell without a directory. Only the minute and hour series lose those
// minutes: the totals, runs, entries and misses are absolute values that
// the next flush that can save them writes whole. Guarded by flushMu.
func (s *Stats) trimUnsaved(now time.Time) {
	cutoff := now.Unix()/60 - int64(s.cfg.MaxUnsavedMinutes) // kept: minutes after it
	a := &s.agg
	dropped := map[int64]bool{}
	a.mu.Lock()
	for k := range a.minutes {
		if k.minute <= cutoff {
			delete(a.minutes, k)
			dropped[k.minute] = true
		}
	}
	for m := range a.globalMinutes {
		if m <= cutoff {
			delete(a.globalMinutes, m)
			dropped[m] = true
		}
	}
	a.mu.Unlock()
	if len(dropped) == 0 {
		return
	}
	s.unsavedDropped.Add(int64(len(dropped)))
	if !s.droppedWarned {
		s.droppedWarned = true
		s.cfg.Logger.Warn("per-minute statistics older than the last max_unsaved_minutes are dropped while their directory is not writable: the time series lose those minutes, the totals keep every count",
			"dir", s.cfg.Dir, "max_unsaved_minutes", s.cfg.MaxUnsavedMinutes)
	}
}

// UnsavedMinutesDropped returns how many minutes of per-minute series were
// dropped, since Open, because their directory stayed unwritable past
// Config.MaxUnsavedMinutes (each minute counted once, however many
// namespaces and backends it held).
func (s *Stats) UnsavedMinutesDropped() int64 { return s.unsavedDropped.Load() }
