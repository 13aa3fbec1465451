package tiered

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cachesvc/cachesvc/store"
)

// diskFull makes err, from writing under dir, a store.ErrFull when the
// filesystem is out of space or quota, so that the upload it fails is a 507
// saying what to do instead of a 500 "internal error": the queue's copy of
// a body is written before the hot tier's reserve is checked.
func diskFull(dir string, err error) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	return fmt.Errorf("upload queue %s: %w: free space on that disk, or lower --upload-queue-size below what it holds: %w", dir, err, store.ErrFull)
}

// diskChecker is the hot tier's free-disk reserve (store.Badger).
type diskChecker interface {
	// CheckDiskFree fails with store.ErrFull when writing n more bytes
	// would leave less than the reserve free.
	CheckDiskFree(n int64) error
}

// checkDisk holds a write of n bytes beside the hot tier (the upload
// queue's copy of a body, written before the hot tier's own) to the hot
// tier's free-disk reserve: a queued body that filled the disk would make
// Badger's next memory-mapped write a SIGBUS. A hot tier without a reserve
// allows it.
func (s *Store) checkDisk(n int) error {
	dc, ok := s.hot.(diskChecker)
	if !ok {
		return nil
	}
	if err := dc.CheckDiskFree(int64(n)); err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	return nil
}
