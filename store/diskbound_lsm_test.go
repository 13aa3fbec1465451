package store

import "testing"

// TestLSMRoom follows the room the disk estimate keeps for the LSM tree
// through scans: charges go to the memtables a scan saw, and are forgotten
// when a scan sees their write-ahead logs gone.
func TestLSMRoom(t *testing.T) {
	type step struct {
		scan    diskScan
		live    int
		charges int
		want    int64 // room after the charges
	}
	steps := []step{
		{scan: diskScan{memLow: 1, memHigh: 1}, live: 0, charges: 2, want: 2 * 2 * lsmPerEntryFloor},
		// Rotated: memtable 1 waits for its flush, 2 takes the writes.
		{scan: diskScan{memLow: 1, memHigh: 2}, live: 2, charges: 1, want: 2 * 3 * lsmPerEntryFloor},
		// Flushed: 1's table is on disk (400 bytes per live entry now);
		// what was charged since 2 was first seen stays.
		{scan: diskScan{memLow: 2, memHigh: 2, tables: 1200}, live: 3, charges: 1, want: 1200 + 2*(lsmPerEntryFloor+400)},
		// Both flushed at once; a new memtable.
		{scan: diskScan{memLow: 3, memHigh: 3, tables: 2000}, live: 4, charges: 0, want: 2000},
		{scan: diskScan{memLow: 3, memHigh: 3, tables: 2000}, live: 4, charges: 3, want: 2000 + 2*3*500},
	}
	var l lsmState
	for i, st := range steps {
		l.observe(st.scan, st.live)
		for range st.charges {
			l.charge()
		}
		if got := l.room(st.scan); got != st.want {
			t.Errorf("step %d: room %d, want %d", i, got, st.want)
		}
	}
}
