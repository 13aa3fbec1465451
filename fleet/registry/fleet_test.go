package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestFleetWhileBucketHangs: with the bucket hung (SIGSTOP: connections are
// accepted, nothing answers), Fleet answers an error naming the wait within
// Config.FleetTimeout, to every concurrent caller at once, and a caller's own
// deadline ends that caller's wait alone; once the bucket answers again the
// fleet is read again. Before, the read ran under the first caller's context
// and a mutex held through it: GET /v1/stats?scope=fleet (the dashboard's
// Fleet card, `cachesvc stats --scope fleet`) took the S3 client's three
// one-minute tries, 181 s, to answer 503 during a hung gateway, and each
// caller behind it waited for the one before, so the dashboard froze for the
// whole outage.
func TestFleetWhileBucketHangs(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	clk := &clock{t: time.Now()}
	r, err := New(Config{Bucket: b, ID: "a", Logger: quiet, Now: clk.Now, FleetTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f, err := r.Fleet(context.Background()); err != nil || len(f.Replicas) != 1 {
		t.Fatalf("fleet before the hang: %+v, %v; want replica a", f, err)
	}
	clk.Set(clk.Now().Add(time.Minute)) // past the cached read
	srv.Pause(t)

	// A hang detector, not a timing assertion: before the fix the calls
	// parked for minutes (this transport has a one-minute header timeout).
	const stuck = 20 * time.Second
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	callers := []struct {
		name string
		ctx  context.Context
		want string // in the error
	}{
		{"first", context.Background(), "no answer within 300ms"},
		{"second", context.Background(), "no answer within 300ms"},
		{"third", context.Background(), "no answer within 300ms"},
		{"own deadline", short, context.DeadlineExceeded.Error()},
	}
	errs := make(chan error, len(callers))
	for _, c := range callers {
		go func() {
			_, err := r.Fleet(c.ctx)
			errs <- err
		}()
	}
	got := map[string]int{}
	for range callers {
		select {
		case err := <-errs:
			switch {
			case err == nil:
				t.Errorf("Fleet with the bucket hung: no error")
			case errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "no answer within"):
				t.Errorf("Fleet: %v: the bound's error must not read as the caller's deadline", err)
			case strings.Contains(err.Error(), "no answer within 300ms"):
				got["no answer within 300ms"]++
			case errors.Is(err, context.DeadlineExceeded):
				got[context.DeadlineExceeded.Error()]++
			default:
				t.Errorf("Fleet: %v; want no answer within 300ms", err)
			}
		case <-time.After(stuck):
			t.Fatalf("Fleet still waiting %s after the bucket hung; want an error within FleetTimeout (300ms)", stuck)
		}
	}
	want := map[string]int{}
	for _, c := range callers {
		want[c.want]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d errors %q, want %d (all: %v)", got[k], k, n, got)
		}
	}

	srv.Resume(t)
	waitFor(t, "the fleet read again", func() bool {
		f, err := r.Fleet(context.Background())
		return err == nil && len(f.Replicas) == 1
	})
}
