// Package tieredtest opens a fleet replica's store for tests of the packages
// above store/tiered: a Badger hot tier in front of a new bucket of a real
// S3 server (s3test, versitygw), as `cachesvc serve --shared` wires one.
package tieredtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// Options are what the tests vary; the zero value is a hot tier without a
// limit and the S3 client's and tiered store's defaults.
type Options struct {
	// Hot is the hot tier; nil opens a new one in a temporary directory.
	Hot *store.Badger
	// HotMaxBytes bounds a new hot tier (its --max-size; 0: no limit).
	HotMaxBytes int64
	// MaxRetries is the S3 client's retries (0: its default).
	MaxRetries int
	// ProbeInterval is how often the tiered store probes the shared tier
	// while it is unreachable (0: its default).
	ProbeInterval time.Duration
	// UsageInterval, when positive, lists the bucket at open and then this
	// often, as a replica does; 0 lists it only when the test calls
	// ScanUsage.
	UsageInterval time.Duration
}

// Open returns the tiered store over a new bucket of srv, and its shared
// tier. Unless o.UsageInterval is set, the bucket is listed only when the
// test calls ScanUsage on the shared tier (UsageInterval -1), so the test
// decides when the replica's first listing happens. The store closes when the test ends.
func Open(t testing.TB, srv *s3test.Server, o Options) (*tiered.Store, *s3.Store) {
	t.Helper()
	hot := o.Hot
	if hot == nil {
		var err error
		if hot, err = store.Open(store.Config{Dir: t.TempDir(), MaxBytes: o.HotMaxBytes}); err != nil {
			t.Fatal(err)
		}
	}
	every := time.Duration(-1)
	if o.UsageInterval > 0 {
		every = o.UsageInterval
	}
	shared, err := s3.Open(context.Background(), s3.Config{Endpoint: srv.Endpoint, Bucket: srv.NewBucket(t), Insecure: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, UsageInterval: every, MaxRetries: o.MaxRetries})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ts, err := tiered.New(tiered.Config{Hot: hot, Shared: shared, SpoolDir: filepath.Join(dir, "spool"),
		QueueDir: filepath.Join(dir, "queue"), ProbeInterval: o.ProbeInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() }) // after a server's shutdown: cleanups run last first
	return ts, shared
}
