package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestHungSharedTierFailsFast: with the S3 server hung (SIGSTOP: its
// socket accepts, nothing answers) and the probe having marked the shared
// tier unreachable, a hot miss's Get, a Stat, a write-through Put and a
// Walk (an entry listing, an export) answer ErrUnavailable within a few
// seconds, while a hot hit is served as ever and a caller's own deadline
// still ends its call as the caller's. Before,
// each parked until the S3 client gave up (minutes in production; here,
// whose transport has no response-header timeout, never). Once the server
// answers again, the tier is used again.
func TestHungSharedTierFailsFast(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	b := newReplica(t, srv, bucket, t.TempDir(), opts{probe: 200 * time.Millisecond})
	// Cleanups, not defers: they run after Pause's resume, so a call left
	// hung by a failure ends and the stores close.
	t.Cleanup(func() { a.Close(); b.Close() })
	big, small := storetest.Data(5, 1<<20), storetest.Data(6, 1000)
	remote, local := storetest.KeyOf("remote"), storetest.KeyOf("local")
	put(t, a, remote, big) // in the shared tier, not in b's hot tier
	put(t, b, local, small)

	srv.Pause(t)
	waitFor(t, 10*time.Second, "probe never marked the hung tier unreachable", func() bool { return !b.SharedState().Reachable })

	const fast = 10 * time.Second // a few times unreachableWait
	for _, tc := range []struct {
		name   string
		caller time.Duration // the caller's own deadline; 0: none
		want   error
		fn     func(ctx context.Context) error
	}{
		{"hot hit", 0, nil, func(ctx context.Context) error {
			_, rc, err := b.Get(ctx, "default", local, 0, -1)
			if err == nil {
				rc.Close()
			}
			return err
		}},
		{"hot miss Get", 0, store.ErrUnavailable, func(ctx context.Context) error {
			_, rc, err := b.Get(ctx, "default", remote, 0, -1)
			if err == nil {
				rc.Close()
			}
			return err
		}},
		{"Stat", 0, store.ErrUnavailable, func(ctx context.Context) error {
			_, err := b.Stat(ctx, "default", remote)
			return err
		}},
		{"Put", 0, store.ErrUnavailable, func(ctx context.Context) error {
			_, err := b.Put(ctx, "default", storetest.KeyOf("new"), bytes.NewReader(small), store.PutOptions{Size: -1})
			return err
		}},
		{"Walk", 0, store.ErrUnavailable, func(ctx context.Context) error {
			return b.Walk(ctx, "default", func(store.Meta) bool { return true })
		}},
		{"WalkAfter", 0, store.ErrUnavailable, func(ctx context.Context) error {
			return b.WalkAfter(ctx, "default", "default", remote, func(store.Meta) bool { return true })
		}},
		{"Stat, caller's deadline first", 500 * time.Millisecond, context.DeadlineExceeded, func(ctx context.Context) error {
			_, err := b.Stat(ctx, "default", remote)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.caller)
				defer cancel()
			}
			done := make(chan error, 1)
			t0 := time.Now()
			go func() { done <- tc.fn(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(fast):
				t.Fatalf("%s with the shared tier hung and marked unreachable: no answer after %s", tc.name, fast)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("%s = %v, want success", tc.name, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("%s = %v, want %v", tc.name, err, tc.want)
			case tc.want == context.DeadlineExceeded && errors.Is(err, store.ErrUnavailable):
				t.Fatalf("%s = %v: the caller's deadline reported as an outage", tc.name, err)
			}
			t.Logf("%s: %v after %s", tc.name, err, time.Since(t0).Round(time.Millisecond))
		})
	}

	srv.Resume(t)
	waitFor(t, 30*time.Second, "SharedState stayed unreachable after the server answered again", func() bool { return b.SharedState().Reachable })
	if got, err := read(t, b, remote, 0, -1); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("hot miss Get once the server answers: %d bytes, %v", len(got), err)
	}
	put(t, b, storetest.KeyOf("after"), small)
	if _, err := a.Stat(context.Background(), "default", storetest.KeyOf("after")); err != nil {
		t.Fatalf("Put once the server answers did not reach the shared tier: %v", err)
	}
}

// TestTransientFaultRecheck: one failed request (a connection reset) marks
// the shared tier unreachable; a probe runs at once and marks it reachable
// again, rather than at the next scheduled probe (an hour here), so one
// fault does not leave calls to a working tier cut short (failfast.go).
func TestTransientFaultRecheck(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	b := newReplica(t, srv, bucket, t.TempDir(), opts{probe: time.Hour})
	defer b.Close()
	key := storetest.KeyOf("blip")
	b.rt.resets.Store(1)
	if _, err := b.Stat(context.Background(), "default", key); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Stat through a reset connection = %v, want ErrUnavailable", err)
	}
	waitFor(t, 5*time.Second, "one transient fault left the working tier marked unreachable", func() bool { return b.SharedState().Reachable })
	put(t, b, key, storetest.Data(7, 2<<20))
}
