package stats

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestFlushUnwritableDir flushes the statistics into a directory the
// process may no longer write, each flush with 2,000 entries' lookups, so
// that a few fill Badger's 4 MiB memtable. Before, the flush that needed
// the next memtable failed to create its file and the next one ended the
// process (Badger's log.Fatalf, or a nil-memtable panic). Now a flush is
// skipped while the directory is not writable, said once, the counts wait
// in memory, and the first flush after access is back saves them all.
func TestFlushUnwritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stats")
	var logs storetest.LogBuffer
	cfg := Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	s.AdmitNamespace("team")
	restore := storetest.MakeReadOnly(t, dir)
	const rounds, entries = 20, 2000
	for r := range rounds {
		for i := range entries {
			s.RecordLookup(Lookup{Namespace: "team", Backend: "xla", Run: fmt.Sprint("run-", i%400),
				Key: sha256.Sum256(fmt.Appendf(nil, "%d", i)), Name: fmt.Sprintf("jit_step_%d_round_%d", i, r), Hit: true, Bytes: 1, CompileSeconds: 1})
		}
		if err := s.Flush(); err != nil {
			t.Fatalf("flush %d into a read-only directory: %v, want it skipped", r, err)
		}
	}
	if n := strings.Count(logs.String(), "not saved while"); n != 1 {
		t.Errorf("%d lines about unsaved statistics, want 1:\n%s", n, logs.String())
	}

	restore()
	if err := s.Flush(); err != nil {
		t.Fatalf("flush with the directory writable again: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot(SnapshotOptions{})
	if got, want := snap.Totals.Hits, int64(rounds*entries); got != want {
		t.Errorf("hits after a restart: %d, want %d (counted while the directory was read-only, saved once it was back)", got, want)
	}
}
