package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
)

// TestLongPollUnderStallTimeout: a long poll moves no byte while the
// holder compiles, so with StallTimeout below the (default 50 s) wait
// slice every wait failed with ErrStalled. Slices now stay under the stall
// timeout, and a wait that runs out with the holder still compiling ends
// as the server says: 404 wait_timeout.
func TestLongPollUnderStallTimeout(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	holder, err := client.New(client.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("5a", 32)
	if _, granted, err := holder.AcquireLease(ctx, "default", key, "holder:1", time.Minute); err != nil || !granted {
		t.Fatalf("AcquireLease: granted %v, %v", granted, err)
	}
	for _, slice := range []time.Duration{0, time.Minute} { // the default, and one set above the stall timeout
		waiter, err := client.New(client.Config{BaseURL: srv.URL, StallTimeout: 1500 * time.Millisecond, WaitSlice: slice})
		if err != nil {
			t.Fatal(err)
		}
		_, err = waiter.Get(ctx, "default", key, 2500*time.Millisecond)
		var e *client.Error
		if errors.Is(err, client.ErrStalled) || !errors.As(err, &e) || e.Code != "wait_timeout" {
			t.Errorf("WaitSlice %s: Get with a wait behind a live lease: %v; want 404 wait_timeout", slice, err)
		}
	}
}
