package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestSIGTERMStatsDirReadOnly takes write access to <data>/stats alone away
// from a running `cachesvc serve` (the rest of --data stays writable). The
// statistics must say so while it runs (WARN, naming the directory), and
// SIGTERM must not wait for their Close, which would retry its flush into
// the directory for good: serve exits 1 at once, naming the directory and
// the statistics as not closed, and closes the store. Before, the close
// watch looked at --data only: serve waited out --shutdown-grace + 5 s for
// the statistics, never closed the store behind them, and blamed neither
// on the directory ("not closed by the end of --shutdown-grace + 5s:
// statistics ...; store ...").
func TestSIGTERMStatsDirReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	const grace = 20 * time.Second // exiting within it is not waiting it out
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	statsDir := filepath.Join(data, "stats")
	p := startServer(t, bin, data, "--shutdown-grace", grace.String())
	if code, _ := putEntry(p, fmt.Sprintf("%064x", 12), 12, 3); code != http.StatusCreated {
		t.Fatalf("PUT = %d, want 201:\n%s", code, p.stderr.String())
	}
	// A flush puts the counts into the statistics' memtable, which their
	// Close must then write into the directory.
	time.Sleep(stats.DefaultFlushInterval + time.Second)
	storetest.MakeReadOnly(t, statsDir)
	const warned = `"level":"WARN","msg":"statistics are counted in memory and not saved while their directory is not writable`
	for deadline := time.Now().Add(3 * stats.DefaultFlushInterval); !strings.Contains(p.stderr.String(), warned); {
		if time.Now().After(deadline) {
			t.Fatalf("no WARN line about the read-only statistics directory:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	start := time.Now()
	code, stderr := p.terminate(t, grace+closeMargin+10*time.Second)
	took := time.Since(start)
	if took >= grace {
		t.Errorf("serve, idle with <data>/stats read-only, exited %s after SIGTERM, past --shutdown-grace (%s): it waited for the statistics' Close", took.Round(time.Millisecond), grace)
	}
	if code != 1 {
		t.Errorf("exit code %d, want 1: the statistics since their last save are lost", code)
	}
	for _, want := range []string{
		"cachesvc serve: the statistics directory " + statsDir + " is gone or not writable: ",
		"Not closed (closing would wait for good to write into the directory): statistics " + statsDir + " (counters since their last save",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if notClosed := "store " + data + " ("; strings.Contains(stderr, notClosed) {
		t.Errorf("the store, whose directory is writable, was not closed:\n%s", stderr)
	}
}
