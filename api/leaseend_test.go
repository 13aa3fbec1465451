package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/wire"
)

// TestWaitEndSaysHowTheLeaseEnded: a long poll whose lease ended without
// the entry names how it ended in error.details, so that a waiter can tell
// a holder that gave up (released: compile now) from one that stopped
// renewing, killed or cut off (expired: take the lease over, so that one
// waiter compiles while the others go on waiting).
func TestWaitEndSaysHowTheLeaseEnded(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		ttl  time.Duration
		end  func(key string) // ends the lease without writing the entry
		want string
	}{
		{"released", time.Minute, func(key string) {
			if err := c.ReleaseLease(ctx, "default", key, "holder"); err != nil {
				t.Error(err)
			}
		}, wire.LeaseReleased},
		{"expired", time.Second, func(string) {}, wire.LeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(200 + i)
			if _, ok, err := c.AcquireLease(ctx, "default", key, "holder", tc.ttl); err != nil || !ok {
				t.Fatal(ok, err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Get(ctx, "default", key, time.Minute)
				done <- err
			}()
			for {
				if _, w := srv.API.LeaseCounts(); w == 1 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			tc.end(key)
			err := <-done
			var ce *client.Error
			if !asError(err, &ce) || ce.Code != "not_found" {
				t.Fatalf("waiter got %v, want 404 not_found", err)
			}
			e, _ := ce.Body["error"].(map[string]any)
			d, _ := e["details"].(map[string]any)
			if d["lease"] != tc.want || d["holder"] != "holder" {
				t.Fatalf("details = %v, want lease %q, holder \"holder\"", e["details"], tc.want)
			}
		})
	}
}
