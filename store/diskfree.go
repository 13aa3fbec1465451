package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// diskFree returns the bytes available to this process on the filesystem
// holding dir.
func diskFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil // Bsize is uint32 on darwin
}

// freeSpaceMaxAge is how long a statfs reading of the free space stands in
// for a new one, and freeSpaceSlack (a fraction of Config.MinFreeDisk) how
// many bytes this store may write on it before it is read again. A small
// PUT then costs no statfs of its own (one per 20 ms at most, instead of
// one per chunk: 1-2% of a crash-safe 4 KiB PUT's CPU), while what the
// store writes itself is still counted against the reserve to the byte, and
// what other processes write is seen within freeSpaceMaxAge.
const (
	freeSpaceMaxAge = 20 * time.Millisecond
	freeSpaceSlack  = 8 // MinFreeDisk / 8 of our own writes between readings
)

// freeSpace is the store's last reading of its filesystem's free space and
// what it has written since.
type freeSpace struct {
	mu      sync.Mutex
	free    int64     // bytes free at the reading
	at      time.Time // when it was read; zero: never
	written int64     // chunk bytes checked since
	// read replaces diskFree in tests.
	read func(dir string) (int64, error)
}

// CheckDiskFree fails with ErrFull when writing n more bytes would leave
// less than Config.MinFreeDisk free under the store's directory. Badger
// writes its value log and tables through memory maps: running the disk
// out of space there is a SIGBUS, not an error, so the store refuses first.
// Concurrent writers may each pass the check at once; the reserve is sized
// to absorb that. A recent reading of the free space, less what the store
// has written since, stands in for a new one (freeSpaceMaxAge); a refusal
// is always decided on a new reading.
//
// Files written beside the store on its filesystem (a tiered store's upload
// queue) are checked too: a disk they fill is a SIGBUS for Badger's next
// write all the same.
func (s *Badger) CheckDiskFree(n int64) error {
	if s.cfg.MinFreeDisk < 0 {
		return nil
	}
	fs := &s.freeSpace
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.at.IsZero() && time.Since(fs.at) < freeSpaceMaxAge &&
		fs.written+n <= s.cfg.MinFreeDisk/freeSpaceSlack &&
		fs.free-fs.written-n >= s.cfg.MinFreeDisk {
		fs.written += n
		return nil
	}
	read := diskFree
	if fs.read != nil {
		read = fs.read
	}
	free, err := read(s.cfg.Dir)
	if err != nil {
		fs.at = time.Time{}
		return err
	}
	fs.free, fs.at, fs.written = free, time.Now(), n
	if free-n < s.cfg.MinFreeDisk {
		fs.written = 0 // refused: nothing will be written
		return fmt.Errorf("disk under %s has %d bytes free, and the store keeps %d in reserve (free space on that disk, or set serve --max-size below it so that eviction makes room): %w", s.cfg.Dir, free, s.cfg.MinFreeDisk, ErrFull)
	}
	return nil
}

// openFree is the free space Open needs under the store's directory: one
// memtable's worth. Badger writes its memtables through memory maps, and
// replaying the memtables left by a killed process faults pages in from
// them; with the disk full (another process filled it), a page the kernel
// cannot allocate is a SIGBUS that kills serve with a runtime stack trace,
// over and over under a supervisor. A store with less than MinFreeDisk
// free still opens and serves reads (its uploads get ErrFull), as it did
// before it stopped: only a disk too full for the writes that reads make
// (access times, statistics) is refused.
func (c Config) openFree() int64 { return c.MemTableSize }

// checkOpenFree fails with ErrFull, saying what to free, when the
// filesystem that holds (or will hold) dir has less than need bytes free.
// read stands in for diskFree (tests). A dir that does not exist yet is
// measured at its nearest existing parent; a statfs that fails skips the
// check (Badger's own open then reports the directory's problem).
func checkOpenFree(dir string, need int64, read func(string) (int64, error)) error {
	at := dir
	for {
		if _, err := os.Stat(at); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		parent := filepath.Dir(at)
		if parent == at {
			break
		}
		at = parent
	}
	free, err := read(at)
	if err != nil || free >= need {
		return nil
	}
	return fmt.Errorf("the disk under %s has %d bytes free and opening the store needs at least %d "+
		"(Badger writes its memtables through memory maps, and a full disk under them kills the process): "+
		"free space on that filesystem, or move the data directory to a larger one, then start again: %w",
		dir, free, need, ErrFull)
}

// checkDiskFree is CheckDiskFree, for the store's own chunk writes.
func (s *Badger) checkDiskFree(n int64) error { return s.CheckDiskFree(n) }
