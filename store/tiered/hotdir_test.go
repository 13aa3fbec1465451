package tiered_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestReadOnlyHotTierLogsNoLinePerRequest: on a replica whose --data is
// read-only, uploads still reach the shared tier and hot misses are served
// from it; the hot tier refuses each write (store.ErrDirUnavailable) and
// says so once itself. Before, every upload and every hot miss also logged
// its own WARN line ("entry stored in the shared tier but not the hot
// tier", "entry fetched from the shared tier not kept in the hot tier"):
// a line per request for as long as the disk stays read-only.
func TestReadOnlyHotTierLogsNoLinePerRequest(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	var logs storetest.LogBuffer
	hotDir := filepath.Join(t.TempDir(), "hot")
	b := newReplica(t, srv, bucket, hotDir, opts{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(func() { a.Close(); b.Close() }) // after the directory is writable again: Badger's Close needs it
	const n = 5
	for i := range n {
		put(t, a, storetest.KeyOf(fmt.Sprint("remote", i)), storetest.Data(uint64(i), 1000))
	}
	storetest.MakeReadOnly(t, hotDir)

	for i := range n {
		data := storetest.Data(uint64(10+i), 1000)
		put(t, b, storetest.KeyOf(fmt.Sprint("local", i)), data) // fails the test unless the shared tier took it
		key := storetest.KeyOf(fmt.Sprint("remote", i))
		if got, err := read(t, b, key, 0, -1); err != nil || !bytes.Equal(got, storetest.Data(uint64(i), 1000)) {
			t.Fatalf("hot miss %d on the read-only replica: %d bytes, %v", i, len(got), err)
		}
	}
	const stored, fetched = "entry stored in the shared tier but not the hot tier", "entry fetched from the shared tier not kept in the hot tier"
	waitFor(t, 10*time.Second, "the fills never ended", func() bool { return strings.Count(logs.String(), fetched) == n })
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && (strings.Contains(line, stored) || strings.Contains(line, fetched)) {
			warned = append(warned, line)
		}
	}
	if len(warned) != 0 || strings.Count(logs.String(), stored) != n {
		t.Errorf("%d WARN lines for %d uploads and %d hot misses refused by a read-only hot tier, want 0 (and %d debug lines for the uploads, got %d):\n%s",
			len(warned), n, n, n, strings.Count(logs.String(), stored), strings.Join(warned, "\n"))
	}
}
