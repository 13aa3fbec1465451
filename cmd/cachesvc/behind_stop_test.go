package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// metricSum returns the sum of the samples of p's /metrics whose line
// starts with prefix (a family, with labels if wanted).
func metricSum(t *testing.T, p *proc, prefix string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestSIGTERMFlushesWriteBehindQueue stops a write-behind replica with its
// queue full of entries acknowledged during an S3 outage, just after S3
// came back (its uploaders waiting out seconds of backoff): within its
// --shutdown-grace the replica uploads them before it exits, so a replica
// whose disk does not survive it loses nothing, and a fresh replica reads
// them all from the bucket. Before, SIGTERM left them on the disk only.
func TestSIGTERMFlushesWriteBehindQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a := f.replicaAt(t, filepath.Join(t.TempDir(), "data"), "--write-mode", "behind", "--shutdown-grace", "60s", "--log-level", "info")
	f.s3.Stop()
	var entries []fleetEntry
	for i := 0; i < 3; i++ {
		key := storeKey(fmt.Sprint("flush-", i))
		n := int64(20<<10 + i*100<<10)
		code, sum := putEntry(a, key, uint64(200+i), n)
		if code != http.StatusCreated {
			t.Fatalf("PUT %d during the outage = %d, want 201 (queued):\n%s", i, code, a.stderr.String())
		}
		entries = append(entries, fleetEntry{key, sum, n})
	}
	// Six failed tries per uploader: the next waits 6.4 s.
	for metricSum(t, a, `cachesvc_shared_tier_errors_total{op="shared_put"}`) < 12 {
		time.Sleep(50 * time.Millisecond)
	}
	f.s3.Restart(t)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, a.stderr.String())
	}
	if !strings.Contains(a.stderr.String(), "upload queue flushed") {
		t.Errorf("the replica does not say that its queue was flushed:\n%s", a.stderr.String())
	}
	b := f.replica(t)
	for _, e := range entries {
		if code, sum := getSHA(t, b, e.key); code != http.StatusOK || sum != e.sha {
			t.Errorf("entry %s from the bucket after A stopped: %d %s, want 200 %s", e.key[:12], code, sum, e.sha)
		}
	}
	b.stop(t, 30*time.Second)
}
