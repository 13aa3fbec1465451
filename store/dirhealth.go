package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dirID identifies the directory the store opened: a directory removed
// and made again under the same path (rm -rf, then a config tool or the
// next start's mkdir) is another directory, and the store's open files are
// not in it.
type dirID struct{ dev, ino uint64 }

// statDirID returns dir's identity. It calls stat(2) itself, not os.Stat,
// which allocates a FileInfo: every write looks (writable).
func statDirID(dir string) (dirID, error) {
	var st syscall.Stat_t
	err := syscall.Stat(dir, &st)
	for err == syscall.EINTR {
		err = syscall.Stat(dir, &st)
	}
	if err != nil {
		return dirID{}, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return dirID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// DirErr reports whether the store's directory is still the one it opened
// and writable: nil, or an error that reads "the data directory DIR is
// gone or not writable: ..." and matches ErrDirUnavailable. A directory
// deleted under a running store (rm -rf of --data) leaves Badger writing
// into files that no longer have a name, so everything written is lost at
// exit, and Badger's Close then waits forever for a memtable flush that
// cannot create its table file. It costs a stat and an access(2), no I/O
// on the store's files, and works after Close too.
//
// # Notes
//
// While the server runs on, Badger needs the directory again only when a
// memtable fills (Config.MemTableSize of keys and metadata; chunks go to
// the value log) and it must create the next one. Where it cannot, Badger
// (v4.9.6, not patched for this) fails that write, then logs "error
// flushing memtable to disk ... retrying" at ERROR once a second for good,
// and is left without a memtable: reads then panic on a nil pointer, and
// the next write fails Badger's assertion, which ends the process
// (log.Fatalf); about 1,600 small uploads filled a 1 MiB memtable. So
// every write looks first (writable) and, while DirErr fails, is refused
// with this error before Badger sees it: uploads and deletes fail with
// ErrDirUnavailable, the background writers (access times, expiry, GC,
// chunk purges, quarantines) skip their turn, and reads go on. Writes
// resume by themselves when the directory is writable again (a chmod or
// remount undone); a directory removed, or removed and made again, needs
// a restart, as the readiness probe and the ERROR line say.
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
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return dirErr(dir, &os.PathError{Op: "access", Path: dir, Err: err})
	}
	return nil
}

// dirErr is DirErr's error for dir.
func dirErr(dir string, cause error) error { return &dirError{dir: dir, cause: cause} }

// dirError is DirErr's error: it reads "the data directory DIR is gone or
// not writable: CAUSE" and matches both ErrDirUnavailable and its cause.
type dirError struct {
	dir   string
	cause error
}

func (e *dirError) Error() string {
	return fmt.Sprintf("the data directory %s is gone or not writable: %s", e.dir, e.cause)
}

func (e *dirError) Unwrap() []error { return []error{ErrDirUnavailable, e.cause} }

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
// broken, so that a change is logged once, not at every look, and counts
// the background writes skipped meanwhile, by kind.
type dirWatch struct {
	broken atomic.Bool
	// epoch is when the store opened; last is writable's last look.
	epoch time.Time
	last  atomic.Pointer[dirLook]

	mu      sync.Mutex
	skipped map[string]int64
}

// watchDir looks at the directory (DirErr) and logs when it breaks; flushLoop
// calls it every Config.FlushInterval, so that an idle store says it too.
func (s *Badger) watchDir() { s.noteDir(s.DirErr()) }

// noteDir logs a change in what the last look at the directory found: when
// it breaks, at ERROR (nothing else would say it before the exit loses the
// data), and when it is back (a chmod undone, a read-only mount made
// writable again), with the background writes skipped meanwhile.
func (s *Badger) noteDir(err error) {
	if s.dirWatch.broken.Load() == (err != nil) {
		return // no change: one load, no write to a shared cache line
	}
	switch was := s.dirWatch.broken.Swap(err != nil); {
	case err != nil && !was:
		s.log.Error("the store cannot keep what it is sent: it refuses uploads, deletes and its own writes until the directory is writable again (restart the server on a directory it can write if it was removed); /readyz fails until then", "err", err)
	case err == nil && was:
		s.dirWatch.mu.Lock()
		skipped := s.dirWatch.skipped
		s.dirWatch.skipped = nil
		s.dirWatch.mu.Unlock()
		args := []any{"dir", s.cfg.Dir}
		for what, n := range skipped {
			args = append(args, "skipped_"+strings.NewReplacer(" ", "_", "-", "_").Replace(what), n)
		}
		s.log.Info("the data directory is writable again; writes resume", args...)
	}
}

// writable is the check every write to Badger passes first (enterWrite,
// the background loops; Put looks anew, lookDir): DirErr. Badger needs
// the directory only when a memtable fills, and then fails for good (see
// DirErr's notes), so a write it is handed while the directory is
// unwritable may be the one that ends the process.
//
// A look costs a stat and an access(2), about 0.8µs (BenchmarkDirErr), and
// a small Put passes two or three checks (up front, its chunk, its
// commit): up to 10% of a 4 KiB Put (~38µs here) when each looked. So Put
// looks anew once, before it reads the body, and a look that found the
// directory writable stands for the other checks for dirLookMaxAge; one
// that found it broken is repeated at every check, so that writes resume
// as soon as it is back. An answer kept for 100ms would let through the
// ~2,000 small Puts that fill a 1 MiB memtable.
func (s *Badger) writable() error {
	now := time.Since(s.dirWatch.epoch) // monotonic: a clock step cannot stretch it
	if l := s.dirWatch.last.Load(); l != nil && l.err == nil && now-l.at < dirLookMaxAge {
		return nil
	}
	return s.lookDir()
}

// lookDir is writable without the remembered answer: DirErr, remembered
// for the next writable.
func (s *Badger) lookDir() error {
	err := s.DirErr()
	s.dirWatch.last.Store(&dirLook{at: time.Since(s.dirWatch.epoch), err: err})
	s.noteDir(err)
	return err
}

// dirLookMaxAge is how long writable trusts a look that found the directory
// writable.
const dirLookMaxAge = time.Millisecond

// dirLook is one look at the directory: when (since dirWatch.epoch) and
// what DirErr answered.
type dirLook struct {
	at  time.Duration
	err error
}

// skipWrite records that a background write (what: "access-time flush",
// "value-log gc", "expiry pass", "chunk purge", "quarantine") was skipped
// because the directory is not writable: the first of each kind while it
// is broken is logged at WARN, saying what waits; the counts are logged
// when it is back.
func (s *Badger) skipWrite(what, waits string, err error) {
	s.dirWatch.mu.Lock()
	if s.dirWatch.skipped == nil {
		s.dirWatch.skipped = map[string]int64{}
	}
	s.dirWatch.skipped[what]++
	first := s.dirWatch.skipped[what] == 1
	s.dirWatch.mu.Unlock()
	if first {
		s.log.Warn(what+" skipped while the data directory is not writable: "+waits, "dir", s.cfg.Dir, "err", err)
	}
}

// flushAccessAtClose writes the batched access state for Close, unless the
// directory is not writable: handing Badger the write could fill the
// memtable it cannot replace.
func (s *Badger) flushAccessAtClose() error {
	if err := s.DirErr(); err != nil {
		s.log.Warn("access times and hit counts since the last flush are lost: the data directory is not writable", "err", err)
		return nil
	}
	return s.flushAccess()
}
