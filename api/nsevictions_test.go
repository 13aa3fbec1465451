package api

import (
	"reflect"
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

// TestWithPersistedEvictions: each namespace reports, reason by reason,
// the larger of the store's count since it opened and the persisted one,
// and in its evictions also those persisted without a reason (by a build
// from before reasons were recorded).
func TestWithPersistedEvictions(t *testing.T) {
	tests := []struct {
		name      string
		store     map[string]int64 // the store's EvictionsByReason
		persisted *wire.EvictionReasons
		legacy    int64 // persisted without a reason
		want      map[string]int64
	}{
		{"after a restart: persisted only", nil, &wire.EvictionReasons{Quota: 6, Idle: 1}, 0, map[string]int64{"quota": 6, "idle": 1}},
		{"stats behind the store", map[string]int64{"size": 3, "age": 2}, &wire.EvictionReasons{Size: 2, Age: 2}, 0, map[string]int64{"size": 3, "age": 2}},
		{"not tracked by the stats", map[string]int64{"quota": 4}, nil, 0, map[string]int64{"quota": 4}},
		{"none", nil, nil, 0, nil},
		{"upgraded: persisted without reasons", nil, &wire.EvictionReasons{}, 3, nil},
		{"upgraded, then evicted", map[string]int64{"quota": 2}, &wire.EvictionReasons{Quota: 1}, 3, map[string]int64{"quota": 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := wire.NamespaceUsage{Namespace: "team-a", EvictionsByReason: tc.store}
			for r, n := range tc.store {
				if r == wire.ReasonIdle || r == wire.ReasonAge {
					u.Expirations += n
				} else {
					u.Evictions += n
				}
			}
			persisted := map[string]nsEvictions{}
			if tc.persisted != nil {
				persisted["team-a"] = nsEvictions{EvictionReasons: *tc.persisted, unattributed: tc.legacy}
			}
			nss := []wire.NamespaceUsage{u}
			withPersistedEvictions(nss, persisted)
			got := nss[0]
			wantEv := tc.want["size"] + tc.want["quota"] + tc.legacy
			wantEx := tc.want["idle"] + tc.want["age"]
			if !reflect.DeepEqual(got.EvictionsByReason, tc.want) || got.Evictions != wantEv || got.Expirations != wantEx {
				t.Errorf("got %+v, want by reason %v (%d evictions, %d expirations)", got, tc.want, wantEv, wantEx)
			}
		})
	}
}

// TestPersistedEvictionsWithoutReasons: a namespace whose statistics
// counted evictions before reasons were recorded (a build from before
// 2026-12-03; its totals hold Evictions and no EvictionsByReason) keeps
// those in its persisted evictions, without a reason. Before, an upgrade
// showed such a namespace with no evictions on the Namespace quotas card
// and in store.namespaces, beside its statistics' totals that had them.
func TestPersistedEvictionsWithoutReasons(t *testing.T) {
	tests := []struct {
		name string
		tot  wire.Totals
		want nsEvictions
		ok   bool
	}{
		{"written before reasons", wire.Totals{Evictions: 3}, nsEvictions{unattributed: 3}, true},
		{"both", wire.Totals{Evictions: 5, EvictionsByReason: wire.EvictionReasons{Quota: 1, Idle: 1}},
			nsEvictions{EvictionReasons: wire.EvictionReasons{Quota: 1, Idle: 1}, unattributed: 3}, true},
		{"all with reasons", wire.Totals{Evictions: 2, EvictionsByReason: wire.EvictionReasons{Size: 2}},
			nsEvictions{EvictionReasons: wire.EvictionReasons{Size: 2}}, true},
		{"none", wire.Totals{Hits: 4}, nsEvictions{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := persistedEvictions([]wire.NamespaceTotals{{Namespace: "team-a", Totals: tc.tot}})["team-a"]
			if ok != tc.ok || got != tc.want {
				t.Errorf("persistedEvictions = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
