package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
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
	c, _ := bucket(t)
	m := c.Manifests(0)
	const n = 1100
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			// Not parts (no ".json"), so that Parts reads none.
			name := fmt.Sprintf("%sreplica-%04d.tmp", m.dir("ns", "run"), i)
			_, err := c.core.PutObject(gctx, c.Bucket(), name, bytes.NewReader([]byte("x")), 1, "", "", minio.PutObjectOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
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
