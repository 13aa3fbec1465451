package store_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestDirErr takes the directory away from an open store in the ways an
// operator does (removed; removed and made again; made read-only) and
// checks that DirErr and the readiness probe (Serving) name the directory
// and the cause, that the store logs it once at ERROR, and that both clear
// when the directory is back. Before, the store went on answering ready
// while nothing it was sent could outlive the process, and said nothing
// but a WARN line a second that it could not measure its disk use.
// The directory is renamed away rather than deleted, so that the store
// can still close: Badger's Close waits forever for a memtable flush into a
// deleted directory (cmd/cachesvc TestSIGTERMDataDirGone covers that).
func TestDirErr(t *testing.T) {
	tests := []struct {
		name  string
		take  func(t *testing.T, dir string) (restore func())
		cause string
	}{
		{"removed", func(t *testing.T, dir string) func() {
			mustRename(t, dir, dir+".away")
			return func() { mustRename(t, dir+".away", dir) }
		}, "no such file or directory"},
		{"removed and made again", func(t *testing.T, dir string) func() {
			mustRename(t, dir, dir+".away")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				mustRename(t, dir+".away", dir)
			}
		}, "removed and made again"},
		{"read-only", func(t *testing.T, dir string) func() {
			return storetest.MakeReadOnly(t, dir) // a read-only bind mount as root
		}, map[bool]string{true: "read-only file system", false: "permission denied"}[os.Geteuid() == 0]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var logs storetest.LogBuffer
			s, err := store.Open(store.Config{Dir: dir, FlushInterval: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.DirErr(); err != nil {
				t.Fatalf("DirErr of a healthy store: %v", err)
			}
			if err := store.Serving(context.Background(), s); err != nil {
				t.Fatalf("Serving of a healthy store: %v", err)
			}

			restore := tc.take(t, dir)
			want := "the data directory " + dir + " is gone or not writable: "
			for name, err := range map[string]error{"DirErr": s.DirErr(), "Serving": store.Serving(context.Background(), s)} {
				if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.cause) {
					t.Errorf("%s: %v, want %q...%q", name, err, want, tc.cause)
				}
			}
			waitLog(t, &logs, "level=ERROR msg=\"the store cannot keep what it is sent")
			// Usage rescans the directory at most once a second; that it
			// cannot is said by the ERROR line, not by a WARN a second.
			time.Sleep(1100 * time.Millisecond)
			_ = s.Usage()
			if strings.Contains(logs.String(), "level=WARN msg=\"measure the store's disk use\"") {
				t.Errorf("a WARN line about the disk use of a directory the ERROR line names:\n%s", logs.String())
			}

			restore()
			if err := s.DirErr(); err != nil {
				t.Errorf("DirErr with the directory back: %v", err)
			}
			waitLog(t, &logs, "the data directory is writable again")
			if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
				t.Errorf("%d ERROR lines, want 1 (a change is logged once):\n%s", n, logs.String())
			}
		})
	}
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until logs holds want; the store looks at its directory
// every FlushInterval.
func waitLog(t *testing.T, logs *storetest.LogBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the store's log:\n%s", want, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
