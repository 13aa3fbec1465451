package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestSIGTERMDataDirGoneQueueReported stops a write-behind fleet replica
// whose --data was deleted (or made read-only) under it while its upload
// queue holds entries the shared tier never got (S3 is down). The hot
// tier's Close cannot run then (Badger waits for good to flush into the
// directory), but the exit must still say how many acknowledged entries
// were not uploaded, and name them (namespace/key): lost when the
// directory is gone, uploaded at the next start on it when it is only
// read-only. Before, serve skipped the tiered store's Close with the hot
// tier's, and the exit said nothing of the queue.
func TestSIGTERMDataDirGoneQueueReported(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	tests := []struct {
		name string
		take func(t *testing.T, data string)
		want string
	}{
		{"removed", func(t *testing.T, data string) {
			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
		}, `"level":"ERROR","msg":"upload queue not empty at shutdown, and its directory is gone: these entries were on this replica's disk only, never reached the shared tier and are lost"`},
		{"read-only", func(t *testing.T, data string) { storetest.MakeReadOnly(t, data) },
			`"level":"WARN","msg":"upload queue not empty at shutdown: these entries are on this replica's disk only, and are uploaded when it starts again on the same data directory"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			p := f.replicaAt(t, data, "--write-mode", "behind", "--shutdown-grace", "1s")
			f.s3.Stop()
			defer f.s3.Restart(t)
			var names []string
			for i := range 3 {
				key := storeKey(fmt.Sprint("unuploaded-", tc.name, i))
				if code, _ := putEntry(p, key, uint64(i), 1000); code != http.StatusCreated {
					t.Fatalf("PUT %d with S3 down = %d, want 201 (queued):\n%s", i, code, p.stderr.String())
				}
				names = append(names, "default/"+key)
			}
			tc.take(t, data)
			code, stderr := p.terminate(t, time.Minute)
			if code != 1 {
				t.Errorf("exit code %d, want 1:\n%s", code, stderr)
			}
			for _, want := range []string{tc.want, `"entries":3`, `"oldest_entries":["` + strings.Join(names, `","`) + `"]`} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %s:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestSIGTERMStatsCloseFailsQueueReported stops a write-behind fleet
// replica whose statistics cannot close for a reason the look at the
// directories does not see (a full disk, an I/O error: here, directories
// where Badger's next table files go, so that its flush fails and retries
// for good), while its upload queue holds entries the shared tier never
// got (S3 is down). The exit must still report the queue, and name the
// statistics as not closed. Before, the shared tier closed after the
// statistics: their Close held it until --shutdown-grace + 5s, and the exit
// named the shared tier as not closed instead of reporting the queue. The
// statistics' Close is now left after statsCloseWait, so that the store
// behind it closes (TestServeStatsCloseHangs).
func TestSIGTERMStatsCloseFailsQueueReported(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	data := filepath.Join(t.TempDir(), "data")
	p := f.replicaAt(t, data, "--write-mode", "behind", "--shutdown-grace", "1s")
	f.s3.Stop()
	defer f.s3.Restart(t)
	for i := range 3 {
		if code, _ := putEntry(p, storeKey(fmt.Sprint("statsfail", i)), uint64(i), 1000); code != http.StatusCreated {
			t.Fatalf("PUT %d with S3 down = %d, want 201 (queued):\n%s", i, code, p.stderr.String())
		}
	}
	for i := 1; i <= 20; i++ {
		if err := os.Mkdir(filepath.Join(data, "stats", fmt.Sprintf("%06d.sst", i)), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	// A flush puts the counts into the statistics' memtable, which their
	// Close must then write into a table file.
	time.Sleep(stats.DefaultFlushInterval + time.Second)
	// The uploaders' retries meanwhile are logged once, and counted.
	if n := metricSum(t, p, "cachesvc_upload_retries_total"); n < 1 {
		t.Errorf("cachesvc_upload_retries_total = %v after S3 was down for %s with 3 entries queued, want at least 1", n, stats.DefaultFlushInterval)
	}
	code, stderr := p.terminate(t, time.Minute)
	if code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{
		`"level":"WARN","msg":"upload queue not empty at shutdown: these entries are on this replica's disk only`, `"entries":3`,
		"not closed (its close did not return in time and was left running, so that the store behind it could close): statistics " +
			filepath.Join(data, "stats") + " (",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "shared tier (upload queue") {
		t.Errorf("the shared tier was not closed:\n%s", stderr)
	}
	if strings.Contains(stderr, "--shutdown-grace + 5s") {
		t.Errorf("a close waited out the deadline (the store behind the statistics, before):\n%s", stderr)
	}
}
