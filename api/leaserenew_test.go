package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestLeaseShortRenewalKeepsTheLease: two threads of one process (one
// holder): the first takes the lease for a long compile, the second asks with
// a shorter ttl_s and is told the process holds it ("renewed"). The lease
// keeps its later expiry, so that another process is not granted it (and
// does not compile the key a second time) once the short TTL has passed.
func TestLeaseShortRenewalKeepsTheLease(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(48)
	first, granted, err := c.AcquireLease(ctx, "default", key, "host:1", time.Hour)
	if err != nil || !granted {
		t.Fatalf("first thread: granted=%v err=%v", granted, err)
	}
	second, granted, err := c.AcquireLease(ctx, "default", key, "host:1", time.Second)
	if err != nil || granted || !second.Renewed {
		t.Fatalf("second thread: granted=%v renewed=%v err=%v, want a renewal, not granted (the first thread compiles)", granted, second.Renewed, err)
	}
	if second.Expires.Before(first.Expires) {
		t.Fatalf("the second thread's 1 s renewal moved the lease's expiry from %v to %v", first.Expires, second.Expires)
	}
	other, granted, err := c.AcquireLease(ctx, "default", key, "host:2", time.Minute)
	if err != nil || granted || other.Holder != "host:1" || other.Expires.Before(first.Expires) {
		t.Fatalf("another process: granted=%v holder=%q expires=%v err=%v, want host:1's lease until %v", granted, other.Holder, other.Expires, err, first.Expires)
	}
}
