package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSIGTERMDataDirGone deletes the --data directory of a running `cachesvc
// serve` (rm -rf), as an operator cleaning up the wrong host does. /readyz
// must fail at once naming the directory, the log must say it at ERROR, and
// SIGTERM must end the idle process without waiting for the store's and the
// statistics' Close (which cannot succeed), exit 1 with an error that names
// the directory and what was not closed. Before, /readyz answered ready,
// nothing was logged, and SIGTERM hung for good: Badger's Close of the
// statistics waited for a memtable flush into the deleted directory, and
// only SIGKILL ended serve; then serve waited for it until the end of
// --shutdown-grace + closeMargin, even with nothing in flight.
func TestSIGTERMDataDirGone(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	// Long, so that an exit within it is not the end of the wait for
	// closes that cannot succeed (grace + closeMargin) by a margin no
	// loaded machine erases.
	const grace = 30 * time.Second
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startServer(t, bin, data, "--shutdown-grace", grace.String())
	// Something in the store's and the statistics' memtables, which their
	// Close must flush.
	if code, _ := putEntry(p, fmt.Sprintf("%064x", 11), 11, 3); code != http.StatusCreated {
		t.Fatalf("PUT = %d, want 201:\n%s", code, p.stderr.String())
	}
	readyz := func() (int, string) {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for status, _ := readyz(); status != http.StatusOK; status, _ = readyz() {
		time.Sleep(10 * time.Millisecond) // the built-in plugins are loading
	}

	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	gone := "the data directory " + data + " is gone or not writable"
	if status, body := readyz(); status != http.StatusServiceUnavailable || !strings.Contains(body, "not_ready") || !strings.Contains(body, gone) {
		t.Errorf("/readyz with --data deleted: %d %s, want 503 not_ready %q", status, body, gone)
	}
	// The store looks at its directory every 5s (store.DefaultFlushInterval).
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.stderr.String(), `"level":"ERROR","msg":"the store cannot keep`); {
		if time.Now().After(deadline) {
			t.Errorf("no ERROR line about the deleted directory within 30s:\n%s", p.stderr.String())
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	start := time.Now()
	// Nothing is in flight, and nothing left to close can: serve has
	// nothing to wait for. Waiting for the closes, it exits at grace +
	// closeMargin; past that (plus slack for a loaded machine) it hangs.
	code, stderr := p.terminate(t, grace+closeMargin+10*time.Second)
	took := time.Since(start)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if took >= grace {
		t.Errorf("serve, idle with its --data deleted, exited %s after SIGTERM, past --shutdown-grace (%s): it waited for closes that cannot succeed", took.Round(time.Millisecond), grace)
	}
	if code != 1 {
		t.Errorf("exit code %d, want 1: what the server held could not be saved", code)
	}
	for _, want := range []string{
		"cachesvc serve: " + gone + ": ",
		`"level":"ERROR","msg":"serve failed"`, // not "stopped while starting", at INFO
		"Not closed (closing would wait for good to write into the directory): ",
		"statistics " + filepath.Join(data, "stats") + " (counters since their last save",
		"store " + data + " (",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
