package statstest

import (
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
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
	return StartReplicaWith(t, srv3, tieredtest.Options{HotMaxBytes: hotMax})
}

// StartReplicaWith is StartReplica with the tiered store's options, e.g. a
// UsageInterval that lists the bucket at open and then on its own.
func StartReplicaWith(t testing.TB, srv3 *s3test.Server, o tieredtest.Options) (*Server, *s3.Store) {
	t.Helper()
	ts, shared := tieredtest.Open(t, srv3, o)
	srv := StartWith(t, func(c *stats.Config) {
		c.Usage = func() stats.Usage { return stats.UsageOf(ts.Usage()) }
	}, func(c *api.Config) {
		c.Store = ts
		c.SharedTier = func() wire.SharedTierState { return wire.SharedTierState{Configured: true, Reachable: true} }
	})
	return srv, shared
}
