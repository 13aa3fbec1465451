package registry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestListCancelledBetweenPages: minio-go ends a listing whose context
// ends between two pages without an error, and List took it for a
// finished listing. The heartbeat reads that follow fail on the same
// context, which hid it, but not when none of the listed objects was a
// heartbeat: List answered an empty fleet. The listing (two pages: S3
// pages hold 1,000 keys) is cancelled at the last objects of its first
// page, where minio-go either reports the cancel or ends silently, by
// chance; hence the repeats.
func TestListCancelledBetweenPages(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	const n = 1100
	// Not heartbeats (no ".json"), so that List reads none.
	srv.FillBucket(t, b.Name, n, func(i int) string { return fmt.Sprintf("%s%s%04d.tmp", b.Prefix, ReplicasDir, i) })
	for i := range 30 {
		cut := 997 + i%3
		ctx, cancel := context.WithCancel(context.Background())
		listed := 0
		b.onListed = func(string) {
			if listed++; listed == cut {
				cancel()
			}
		}
		list, err := List(ctx, b, time.Now(), 0)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("List cancelled at object %d of %d: %d replicas, err = %v, want context.Canceled", cut, n, len(list), err)
		}
	}
}
