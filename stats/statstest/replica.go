package statstest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered"
	"github.com/cachesvc/cachesvc/wire"
)

// StartReplica starts a fleet replica as `cachesvc serve` wires one: a real
// server (StartWith) over a tiered store, a Badger hot tier bounded by
// hotMax bytes (0: no limit) in front of a new bucket of srv3, whose
// statistics sample the tiered store. The bucket is listed only when the
// test calls ScanUsage on the shared tier returned (UsageInterval -1), so
// the test decides when the replica's first listing happens.
func StartReplica(t testing.TB, srv3 *s3test.Server, hotMax int64) (*Server, *s3.Store) {
	t.Helper()
	hot, err := store.Open(store.Config{Dir: t.TempDir(), MaxBytes: hotMax})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s3.Open(context.Background(), s3.Config{Endpoint: srv3.Endpoint, Bucket: srv3.NewBucket(t), Insecure: true,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, UsageInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ts, err := tiered.New(tiered.Config{Hot: hot, Shared: shared, SpoolDir: filepath.Join(dir, "spool"), QueueDir: filepath.Join(dir, "queue")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() }) // after the server's shutdown: cleanups run last first
	srv := StartWith(t, func(c *stats.Config) {
		c.Usage = func() stats.Usage { return stats.UsageOf(ts.Usage()) }
	}, func(c *api.Config) {
		c.Store = ts
		c.SharedTier = func() wire.SharedTierState { return wire.SharedTierState{Configured: true, Reachable: true} }
	})
	return srv, shared
}
