package s3test_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestServerRoundTrip checks the helper itself: an object written through
// the S3 API is the file in the posix directory, and conditional create
// answers 412 on an existing key (the store relies on both).
func TestServerRoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	c := srv.Client(t, nil)
	ctx := context.Background()
	body := []byte("hello s3")
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	if _, err := c.PutObject(ctx, bucket, "a/b", bytes.NewReader(body), int64(len(body)), opts); err != nil {
		t.Fatalf("put: %v", err)
	}
	_, err := c.PutObject(ctx, bucket, "a/b", bytes.NewReader(body), int64(len(body)), opts)
	if minio.ToErrorResponse(err).StatusCode != 412 {
		t.Fatalf("second conditional put: %v, want 412", err)
	}
	obj, err := c.GetObject(ctx, bucket, "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get: %q, %v", got, err)
	}
	srv.Stop()
	if _, err := c.StatObject(ctx, bucket, "a/b", minio.StatObjectOptions{}); err == nil {
		t.Fatal("stat succeeded with the server stopped")
	}
	srv.Restart(t)
	if _, err := c.StatObject(ctx, bucket, "a/b", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("stat after restart: %v", err)
	}
}
