package registry_test

import (
	"fmt"
	"time"

	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/wire"
)

// Merge adds up the replicas' snapshots and counts the healthy replicas.
func ExampleMerge() {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	replicas := []wire.ReplicaStatus{
		{ID: "a", Health: wire.HealthOK, Stats: &wire.Snapshot{Totals: wire.Totals{Lookups: 100, Hits: 90}}},
		{ID: "b", Health: wire.HealthStale, Stats: &wire.Snapshot{Totals: wire.Totals{Lookups: 100, Hits: 50}}},
	}
	fleet := registry.Merge(replicas, now)
	fmt.Printf("%d of %d healthy; %d lookups, hit rate %.2f\n",
		fleet.Healthy, len(fleet.Replicas), fleet.Totals.Totals.Lookups, fleet.Totals.Totals.HitRate)
	// Output: 1 of 2 healthy; 200 lookups, hit rate 0.70
}
