package s3test

import (
	"bytes"
	"context"
	"testing"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
)

// fillConcurrency is how many puts FillBucket keeps in flight: one at a
// time, 1,100 objects took seconds of round trips; more than this gains
// nothing on the 2-core test machines.
const fillConcurrency = 16

// FillBucket puts n objects of one byte each into bucket, the i-th named
// name(i), and fails t if a put fails. It is for tests that need a
// listing of several pages (S3 pages hold 1,000 keys), such as one
// cancelled between two pages; name decides which kind of object the code
// under test takes them for.
func (s *Server) FillBucket(t testing.TB, bucket string, n int, name func(i int) string) {
	t.Helper()
	c := s.Client(t, nil)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(fillConcurrency)
	for i := range n {
		g.Go(func() error {
			_, err := c.PutObject(ctx, bucket, name(i), bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill bucket %s with %d objects: %v", bucket, n, err)
	}
}
