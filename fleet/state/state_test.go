package state

import (
	"context"
	"testing"

	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

var ctx = context.Background()

// bucket starts versitygw (or skips, see s3test) and returns a client on a
// fresh bucket, and the server for outage tests.
func bucket(t *testing.T) (*Client, *s3test.Server) {
	t.Helper()
	srv := s3test.Start(t)
	c := client(t, srv, srv.NewBucket(t))
	return c, srv
}

// client returns another replica's client on the same bucket.
func client(t *testing.T, srv *s3test.Server, bucket string) *Client {
	t.Helper()
	c, err := New(s3.Config{
		Endpoint: srv.Endpoint, Bucket: bucket, Prefix: "fleet", Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
