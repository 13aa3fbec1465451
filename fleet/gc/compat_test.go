package gc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/fleet/gc"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestGcStopsAtNewerRecord: a record of a version newer than this gc
// reads (written by a newer replica, which may name its bytes some new
// way) stops the run before the blob sweep, saying to run the newer gc,
// instead of treating the record as unreadable and deleting the blob it
// uses once past the grace.
func TestGcStopsAtNewerRecord(t *testing.T) {
	e := newEnv(t, s3test.Start(t))
	data := "bytes a newer replica stored"
	e.object(blobName(data), data, old)
	sum := strings.TrimPrefix(blobName(data), prefix+"blobs/")
	rec := fmt.Sprintf(`{"v":3,"namespace":"team-a","key":"%s","size":%d,"blobs":[{"sha256":"%s"}]}`, keyOf("newer"), len(data), sum)
	e.object(entryName("team-a", "newer"), rec, young)
	_, err := gc.Run(context.Background(), gc.Config{Bucket: e.bucket, Logger: quiet})
	if !errors.Is(err, store.ErrNewerFormat) {
		t.Fatalf("gc.Run = %v, want ErrNewerFormat", err)
	}
	for _, w := range []string{"version 3", "reads version 2 at most", "run the gc of the cachesvc that wrote it"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("gc.Run: %v\nwant it to say %q", err, w)
		}
	}
	if !e.exists(blobName(data)) || !e.exists(entryName("team-a", "newer")) {
		t.Errorf("after gc: blob kept %v, record kept %v; want both kept", e.exists(blobName(data)), e.exists(entryName("team-a", "newer")))
	}
}
