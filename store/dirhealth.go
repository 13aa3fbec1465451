package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// dirID identifies the directory the store opened: a directory removed
// and made again under the same path (rm -rf, then a config tool or the
// next start's mkdir) is another directory, and the store's open files are
// not in it.
type dirID struct{ dev, ino uint64 }

// statDirID returns dir's identity.
func statDirID(dir string) (dirID, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return dirID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, nil // no identity to compare: only presence is checked
	}
	return dirID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// DirErr reports whether the store's directory is still the one it opened
// and writable: nil, or an error that reads "the data directory DIR is
// gone or not writable: ...". A directory deleted under a running store
// (rm -rf of --data) leaves Badger writing into files that no longer have
// a name, so everything written is lost at exit, and Badger's Close then
// waits forever for a memtable flush that cannot create its table file.
// It costs a stat and an access(2), no I/O on the store's files, and works
// after Close too.
//
// # Notes
//
// While the server runs on, Badger needs the directory again only when a
// memtable fills (Config.MemTableSize of keys and metadata; chunks go to
// the value log) and it must create the next one. Where it cannot, Badger
// (v4.9.6, not patched for this) fails that write, then logs "error
// flushing memtable to disk ... retrying" at ERROR once a second for good,
// at no CPU to speak of, and is left without a memtable: reads then panic
// on a nil pointer, and the next write fails Badger's assertion, which
// ends the process (log.Fatalf). Put refuses uploads while the directory
// is gone (its free-space check cannot statfs it), so there only the
// store's own writes (access times, expiry) fill the memtable, slowly; in
// a directory that is there but not writable (EACCES; root is not
// refused) uploads go on, and about 2,000 small ones fill a 1 MiB
// memtable. Restart on a directory the store can write, as the readiness
// probe and watchDir's ERROR line say; bounding this in the store means
// refusing writes while DirErr fails, not a change to Badger.
func (s *Badger) DirErr() error {
	dir := s.cfg.Dir
	id, err := statDirID(dir)
	switch {
	case err != nil:
		return dirErr(dir, err)
	case s.dirID != (dirID{}) && id != (dirID{}) && id != s.dirID:
		return dirErr(dir, errors.New("it was removed and made again: this is not the directory the store opened, whose files are gone"))
	}
	// access(2) answers EROFS on a read-only mount and EACCES where the
	// process may not write (root passes the mode bits, as it does when it
	// writes).
	if err := syscall.Access(dir, accessWrite); err != nil {
		return dirErr(dir, &os.PathError{Op: "access", Path: dir, Err: err})
	}
	return nil
}

// accessWrite is access(2)'s W_OK, the same on every Unix (the syscall
// package does not name it).
const accessWrite = 2

// dirErr is DirErr's error for dir.
func dirErr(dir string, cause error) error {
	return fmt.Errorf("the data directory %s is gone or not writable: %w", dir, cause)
}

// Ready reports whether the store serves requests, for readiness probes
// (Serving): nil, ErrClosed after Close, or DirErr's error while the
// directory is gone or not writable. A replica in that state still answers
// what Badger holds, but keeps none of what it is sent past its exit, so it
// should leave the load balancer and be restarted on a directory it can
// write.
func (s *Badger) Ready() error {
	_, err := s.Stat(context.Background(), DefaultNamespace, Key{})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return s.DirErr()
}

// dirWatch remembers whether the last look at the directory found it
// broken, so that watchDir logs a change once, not at every look.
type dirWatch struct{ broken atomic.Bool }

// watchDir looks at the directory (DirErr) and logs when it breaks, at
// ERROR (nothing else would say it before the exit loses the data), and
// when it is back (a read-only mount made writable again). flushLoop calls
// it, every Config.FlushInterval.
func (s *Badger) watchDir() {
	err := s.DirErr()
	switch was := s.dirWatch.broken.Swap(err != nil); {
	case err != nil && !was:
		s.log.Error("the store cannot keep what it is sent: restart the server on a directory it can write; /readyz fails until then", "err", err)
	case err == nil && was:
		s.log.Info("the data directory is writable again", "dir", s.cfg.Dir)
	}
}
