package tiered_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// TestUploadRetriesLoggedOnce: uploads that keep failing (the shared tier
// down, the upload queue's directory removed under the process) are said
// once at WARN when they start failing, again only when the cause changes,
// and once at INFO when an upload succeeds again, with the retries in
// between; the retries themselves go to DEBUG. Before, every uploader
// logged a WARN line at every retry (backoff up to 30 s) until exit: 24
// identical lines in the first minute of a replica whose queue directory
// was removed, 240 an hour.
func TestUploadRetriesLoggedOnce(t *testing.T) {
	srv := s3test.Start(t)
	const failing, back = "uploads to the shared tier fail; retrying", "uploads to the shared tier succeed again"
	tests := []struct {
		name string
		// after runs once uploads fail with S3 down; it returns the
		// WARN lines it expects in all (one per cause), and leaves S3
		// running if an upload is to succeed again.
		after      func(t *testing.T, a *replica, queueDir string) int
		wantBack   bool   // an upload succeeds again
		wantInWarn string // the cause a WARN line names
	}{
		{"queue directory removed", func(t *testing.T, a *replica, queueDir string) int {
			if err := os.RemoveAll(queueDir); err != nil {
				t.Fatal(err)
			}
			r0 := a.Stats().UploadRetries
			waitFor(t, time.Minute, "the uploaders never retried", func() bool { return a.Stats().UploadRetries >= r0+8 })
			return 2 // S3 down, then the directory gone (S3 stays down:
			// an upload whose body was open before the removal could
			// succeed)
		}, false, "the upload queue's directory is gone"},
		{"shared tier back", func(t *testing.T, a *replica, _ string) int {
			srv.Restart(t)
			waitFor(t, time.Minute, "the queue never drained", func() bool { return a.Stats().QueueEntries == 0 })
			return 1
		}, true, "storage tier is unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs storetest.LogBuffer
			dir := filepath.Join(t.TempDir(), "hot")
			a := newReplica(t, srv, srv.NewBucket(t), dir, opts{mode: tiered.ModeBehind,
				logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			srv.Stop()
			for i := range 3 {
				put(t, a, storetest.KeyOf(fmt.Sprint(tc.name, i)), storetest.Data(uint64(i), 1000))
			}
			waitFor(t, time.Minute, "the uploaders never retried", func() bool { return a.Stats().UploadRetries >= 4 })
			wantWarn := tc.after(t, a, dir+"-queue")
			a.Close()
			retries := a.Stats().UploadRetries
			if !tc.wantBack {
				srv.Restart(t) // for the next case
			}

			var warned, recovered []string
			for _, line := range strings.Split(logs.String(), "\n") {
				switch {
				case strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "upload to the shared tier failed"):
					warned = append(warned, line) // the old line, once per retry
				case strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, failing):
					warned = append(warned, line)
				case strings.Contains(line, `"level":"INFO"`) && strings.Contains(line, back):
					recovered = append(recovered, line)
				}
			}
			if len(warned) != wantWarn || !strings.Contains(strings.Join(warned, "\n"), tc.wantInWarn) {
				t.Errorf("%d WARN lines for %d retries, want %d naming %q:\n%s", len(warned), retries, wantWarn, tc.wantInWarn, strings.Join(warned, "\n"))
			}
			switch {
			case tc.wantBack && (len(recovered) != 1 || !strings.Contains(recovered[0], fmt.Sprintf(`"retries":%d,`, retries))):
				t.Errorf("want one INFO %q line with \"retries\":%d, got:\n%s", back, retries, strings.Join(recovered, "\n"))
			case !tc.wantBack && len(recovered) != 0:
				t.Errorf("uploads never succeeded, yet:\n%s", strings.Join(recovered, "\n"))
			case !tc.wantBack && !strings.Contains(logs.String(), fmt.Sprintf(`"retries":%d`, retries)):
				// Still failing at exit: the shutdown report counts them.
				t.Errorf("the shutdown report does not count the %d retries:\n%s", retries, logs.String())
			}
		})
	}
}
