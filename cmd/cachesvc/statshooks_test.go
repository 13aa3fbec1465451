package main

import (
	"fmt"
	"testing"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestStatsHooksKeepEvictionsUntilAttach: evictions the store reports
// before the statistics attach are counted when they do, by namespace and
// reason, and past maxPendingEvictionKinds kinds still count (under no
// namespace), so the map kept meanwhile is bounded.
func TestStatsHooksKeepEvictionsUntilAttach(t *testing.T) {
	tests := []struct {
		name          string
		kinds         int // distinct namespaces evicted from before attach
		wantTeamA     wire.EvictionReasons
		wantEvictions int64
	}{
		{"a few kinds", 3, wire.EvictionReasons{Size: 2, Age: 1}, 3 + 3},
		{"past the bound", maxPendingEvictionKinds + 10, wire.EvictionReasons{Size: 2, Age: 1}, maxPendingEvictionKinds + 10 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := stats.Open(stats.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			st.AdmitNamespace("team-a")
			var h statsHooks
			evict := func(ns, reason string) { h.evicted(store.Meta{Namespace: ns, Backend: "xla"}, reason) }
			evict("team-a", wire.ReasonSize)
			evict("team-a", wire.ReasonAge)
			for i := range tt.kinds {
				evict(fmt.Sprintf("ns-%d", i), wire.ReasonIdle)
			}
			if n := len(h.pending); n > maxPendingEvictionKinds+4 {
				t.Fatalf("%d kinds kept before attach, want at most %d and one per reason", n, maxPendingEvictionKinds)
			}
			h.attach(st)
			evict("team-a", wire.ReasonSize) // after attach: straight to the statistics
			if got := st.NamespaceEvictions()["team-a"]; got != tt.wantTeamA {
				t.Errorf("team-a's evictions %+v, want %+v", got, tt.wantTeamA)
			}
			if got := st.Snapshot(stats.SnapshotOptions{}).Totals.Evictions; got != tt.wantEvictions {
				t.Errorf("total evictions %d, want %d", got, tt.wantEvictions)
			}
		})
	}
}
