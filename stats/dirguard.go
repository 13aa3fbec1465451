package stats

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dirErr reports whether the statistics directory can take a flush: nil,
// or an error naming it, while it is gone or the process may not write it
// (a chmod, a read-only remount of --data). Badger needs the directory
// when a memtable fills; where it cannot create the next one it fails for
// good and ends the process at the next write (see store.Badger.DirErr),
// so flush looks first. An access(2), no I/O; in memory there is nothing
// to look at.
func (s *Stats) dirErr() error {
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
		s.cfg.Logger.Warn("statistics are counted in memory and not saved while their directory is not writable: make it writable again (they are saved at the next flush), or they are lost at exit", "err", err)
	case err == nil && s.dirBroken:
		s.cfg.Logger.Info("the statistics directory is writable again; statistics are saved", "dir", s.cfg.Dir)
	}
	s.dirBroken = err != nil
}
