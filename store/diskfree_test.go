package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCheckDiskFreeReadings checks when checkDiskFree reads the free space
// again (a fake filesystem with a fixed free space stands in for statfs, and
// counts the readings): a refusal always comes from a new reading, and a
// recent reading stands in for a new one only while what the store wrote
// since, counted to the byte, keeps the reserve and stays within the slack.
func TestCheckDiskFreeReadings(t *testing.T) {
	const (
		kib = 1 << 10
		gib = 1 << 30
	)
	tests := []struct {
		name      string
		reserve   int64 // Config.MinFreeDisk
		free      int64 // what the fake statfs reports
		size      int64 // bytes per check
		checks    int
		wantOK    bool
		minReads  int64 // at least this many readings
		maxReads  int64 // at most this many (0: checks)
		wantInErr string
	}{
		{name: "refused: every check reads again", reserve: gib, free: gib + kib, size: 4 * kib, checks: 5,
			minReads: 5, wantInErr: "1073742848 bytes free, and the store keeps 1073741824 in reserve (free space on that disk, or set serve --max-size"},
		{name: "small writes share readings", reserve: gib, free: 100 * gib, size: 4 * kib, checks: 1000,
			wantOK: true, minReads: 1, maxReads: 500},
		{name: "own writes count against the reserve", reserve: gib, free: gib + 10*mib, size: mib, checks: 11,
			wantOK: true, minReads: 2},
		{name: "slack bounds own writes between readings", reserve: 64 * mib, free: 100 * gib, size: mib, checks: 20,
			wantOK: true, minReads: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Badger{cfg: Config{Dir: "/fake", MinFreeDisk: tt.reserve}}
			var reads atomic.Int64
			s.freeSpace.read = func(string) (int64, error) { reads.Add(1); return tt.free, nil }
			for i := 0; i < tt.checks; i++ {
				err := s.checkDiskFree(tt.size)
				if tt.wantOK && err != nil {
					t.Fatalf("check %d: %v", i, err)
				}
				if !tt.wantOK && (!errors.Is(err, ErrFull) || !strings.Contains(err.Error(), tt.wantInErr)) {
					t.Fatalf("check %d = %v, want ErrFull saying %q", i, err, tt.wantInErr)
				}
			}
			maxReads := tt.maxReads
			if maxReads == 0 {
				maxReads = int64(tt.checks)
			}
			if n := reads.Load(); n < tt.minReads || n > maxReads {
				t.Errorf("%d readings for %d checks, want %d to %d", n, tt.checks, tt.minReads, maxReads)
			}
		})
	}
}

// TestPutKeepsDiskReserve runs Puts against the real free space of the test's
// disk: a reserve larger than it refuses every upload with ErrFull and stores
// nothing (no entry, no chunk), single-chunk and chunked alike; a small one
// admits them.
func TestPutKeepsDiskReserve(t *testing.T) {
	free, err := diskFree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		reserve int64
		size    int
		wantErr error
	}{
		{"single chunk under a reserve above the free space", free + 1<<40, 4 << 10, ErrFull},
		{"chunked under a reserve above the free space", free + 1<<40, 3*mib + 5, ErrFull},
		{"single chunk under a small reserve", mib, 4 << 10, nil},
		{"chunked under a small reserve", mib, 3*mib + 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir(), MinFreeDisk: tt.reserve})
			defer s.Close()
			ctx := context.Background()
			key := keyOf(tt.name)
			data := pattern(3, tt.size)
			_, err := s.Put(ctx, "ns", key, bytes.NewReader(data), PutOptions{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil {
				if _, err := s.Stat(ctx, "ns", key); err != nil {
					t.Errorf("Stat after the Put: %v", err)
				}
				return
			}
			if !strings.Contains(err.Error(), "in reserve") {
				t.Errorf("error %q does not say what the reserve is", err)
			}
			if _, err := s.Stat(ctx, "ns", key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat after the refused Put = %v, want ErrNotFound", err)
			}
			if n := countChunks(t, s); n != 0 {
				t.Errorf("%d chunks left after the refused Put", n)
			}
		})
	}
}

// TestCheckOpenFree checks the free space Open needs before it lets Badger
// map its memtables (a fake statfs stands in for a full disk): too little
// is ErrFull naming the directory, the bytes and what to do; a directory
// not made yet is measured at its nearest existing parent.
func TestCheckOpenFree(t *testing.T) {
	existing := t.TempDir()
	tests := []struct {
		name      string
		dir       string
		free      int64
		readErr   error
		wantAt    string // the path statfs is asked about
		wantInErr string // empty: no error
	}{
		{name: "enough", dir: existing, free: 64 * mib, wantAt: existing},
		{name: "exactly enough", dir: existing, free: 16 * mib, wantAt: existing},
		{name: "full disk", dir: existing, free: 0, wantAt: existing,
			wantInErr: "has 0 bytes free and opening the store needs at least 16777216"},
		{name: "not made yet", dir: existing + "/a/b", free: 4096, wantAt: existing,
			wantInErr: "free space on that filesystem, or move the data directory"},
		{name: "statfs fails: Badger reports", dir: existing, readErr: errors.New("EIO"), wantAt: existing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var at string
			err := checkOpenFree(tt.dir, 16*mib, func(dir string) (int64, error) { at = dir; return tt.free, tt.readErr })
			if at != tt.wantAt {
				t.Errorf("statfs of %q, want %q", at, tt.wantAt)
			}
			if tt.wantInErr == "" {
				if err != nil {
					t.Fatalf("checkOpenFree = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), tt.wantInErr) || !strings.Contains(err.Error(), tt.dir) {
				t.Fatalf("checkOpenFree = %v, want ErrFull naming %s and saying %q", err, tt.dir, tt.wantInErr)
			}
		})
	}
}

// TestOpenRefusesWithoutRoomForMemtable opens a store whose memtable could
// not fit on any disk: Open refuses with ErrFull before Badger maps
// anything.
func TestOpenRefusesWithoutRoomForMemtable(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(Config{Dir: dir, MemTableSize: 1 << 55})
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "opening the store needs at least") {
		t.Fatalf("Open with a memtable larger than the disk = %v, want ErrFull", err)
	}
}
