package store

import (
	"fmt"
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

// checkDiskFree fails with ErrFull when writing n more bytes would leave
// less than Config.MinFreeDisk free under the store's directory. Badger
// writes its value log and tables through memory maps: running the disk
// out of space there is a SIGBUS, not an error, so the store refuses first.
// Concurrent writers may each pass the check at once; the reserve is sized
// to absorb that. A recent reading of the free space, less what the store
// has written since, stands in for a new one (freeSpaceMaxAge); a refusal
// is always decided on a new reading.
func (s *Badger) checkDiskFree(n int64) error {
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
		return fmt.Errorf("disk under %s has %d bytes free, and the store keeps %d in reserve: %w", s.cfg.Dir, free, s.cfg.MinFreeDisk, ErrFull)
	}
	return nil
}
