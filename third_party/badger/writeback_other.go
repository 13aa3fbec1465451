//go:build !linux

package badger

import (
	"os"
	"sync/atomic"
)

// startWriteback does nothing where sync_file_range(2) does not exist
// (cachesvc): the page cache is written back by the kernel's own schedule.
func startWriteback(*os.File, int64, int64) {}

// writeVlog writes b at off in f (cachesvc); uncached writes are Linux's
// (writeback_linux.go).
func writeVlog(f *os.File, b []byte, off int64, _ *atomic.Bool) error {
	_, err := f.WriteAt(b, off)
	return err
}
