package store

import (
	"fmt"
	"syscall"
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

// checkDiskFree fails with ErrFull when writing n more bytes would leave
// less than Config.MinFreeDisk free under the store's directory. Badger
// writes its value log and tables through memory maps: running the disk
// out of space there is a SIGBUS, not an error, so the store refuses first.
// Concurrent writers may each pass the check at once; the reserve is sized
// to absorb that.
func (s *Badger) checkDiskFree(n int64) error {
	if s.cfg.MinFreeDisk < 0 {
		return nil
	}
	free, err := diskFree(s.cfg.Dir)
	if err != nil {
		return err
	}
	if free-n < s.cfg.MinFreeDisk {
		return fmt.Errorf("disk under %s has %d bytes free, and the store keeps %d in reserve: %w", s.cfg.Dir, free, s.cfg.MinFreeDisk, ErrFull)
	}
	return nil
}
