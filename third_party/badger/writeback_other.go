//go:build !linux

package badger

import "os"

// startWriteback does nothing where sync_file_range(2) does not exist
// (cachesvc): the page cache is written back by the kernel's own schedule.
func startWriteback(*os.File, int64, int64) {}
