//go:build linux

package badger

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing [off, off+n) of f back
// to disk without waiting for it (cachesvc).
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// cachesvc: uncachedWriteMin is the smallest value-log write whose whole
// pages go through the page cache uncached (writeVlog). Small values stay
// cached: they are the ones read back soon, and an uncached write of a
// few pages would only trade a copy for a writeback kick.
const uncachedWriteMin = 256 << 10

// writeVlog writes b at off in f (cachesvc). The whole pages of a write of
// at least uncachedWriteMin bytes are written with RWF_DONTCACHE: the
// kernel copies them into the page cache as usual (so a read through the
// value log's map sees them at once), starts their writeback right away
// and drops them when it is done. Large values are executables that other
// hosts fetch, rarely read back here at once; keeping them cached made
// every new write copy into pages the kernel had to allocate (and, in a
// VM, the host to back afresh), on Badger's one value-log writer
// goroutine, and that copy was most of a large upload's cost. Uncached,
// the same pages are reused while still warm. The partial pages at
// either end are written cached, so that the neighbouring entries' writes
// find them in the page cache instead of reading them back from disk.
// Durability is unchanged: Sync still flushes the file. Where the kernel
// (before 6.14) or the file system (tmpfs, for one) refuses an uncached
// write, it sets cachedOnly and writes cached, as every later call does.
func writeVlog(f *os.File, b []byte, off int64, cachedOnly *atomic.Bool) error {
	if len(b) < uncachedWriteMin || cachedOnly.Load() {
		_, err := f.WriteAt(b, off)
		return err
	}
	page := int64(os.Getpagesize())
	lo := (off + page - 1) &^ (page - 1)      // first whole page
	hi := (off + int64(len(b))) &^ (page - 1) // end of the last whole page
	if lo > off {
		if _, err := f.WriteAt(b[:lo-off], off); err != nil {
			return err
		}
	}
	for mid := b[lo-off : hi-off]; len(mid) > 0; {
		n, err := unix.Pwritev2(int(f.Fd()), [][]byte{mid}, lo, unix.RWF_DONTCACHE)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			cachedOnly.Store(true)
			if _, err := f.WriteAt(mid, lo); err != nil {
				return err
			}
			mid = nil
		case err != nil:
			return &os.PathError{Op: "pwritev2", Path: f.Name(), Err: err}
		case n == 0:
			return &os.PathError{Op: "pwritev2", Path: f.Name(), Err: io.ErrShortWrite}
		default:
			mid, lo = mid[n:], lo+int64(n)
		}
	}
	if tail := b[hi-off:]; len(tail) > 0 {
		_, err := f.WriteAt(tail, hi)
		return err
	}
	return nil
}
