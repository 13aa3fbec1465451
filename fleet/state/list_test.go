package state

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestPartsCancelledBetweenPages: minio-go ends a listing whose context
// ends between two pages without an error, and Parts took it for a
// finished listing. The part reads that follow fail on the same context,
// which hid it, but not when none of the listed objects was a part: Parts
// answered a run without parts. The listing (two pages: S3 pages hold
// 1,000 keys) is cancelled at the last objects of its first page, where
// minio-go either reports the cancel or ends silently, by chance; hence
// the repeats.
func TestPartsCancelledBetweenPages(t *testing.T) {
	c, srv := bucket(t)
	m := c.Manifests(0)
	const n = 1100
	// Not parts (no ".json"), so that Parts reads none.
	srv.FillBucket(t, c.Bucket(), n, func(i int) string { return fmt.Sprintf("%sreplica-%04d.tmp", m.dir("ns", "run"), i) })
	for i := range 30 {
		cut := 997 + i%3
		lctx, cancel := context.WithCancel(ctx)
		listed := 0
		c.onListed = func(string) {
			if listed++; listed == cut {
				cancel()
			}
		}
		parts, more, err := m.Parts(lctx, "ns", "run", 2000)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Parts cancelled at object %d of %d: %d parts, more %v, err = %v, want context.Canceled", cut, n, len(parts), more, err)
		}
	}
}
