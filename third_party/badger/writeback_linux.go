//go:build linux

package badger

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing [off, off+n) of f back
// to disk without waiting for it (cachesvc).
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
