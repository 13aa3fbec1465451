package api

import (
	"reflect"
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

// TestWithPersistedEvictions: each namespace reports, reason by reason,
// the larger of the store's count since it opened and the persisted one.
func TestWithPersistedEvictions(t *testing.T) {
	tests := []struct {
		name      string
		store     map[string]int64 // the store's EvictionsByReason
		persisted *wire.EvictionReasons
		want      map[string]int64
	}{
		{"after a restart: persisted only", nil, &wire.EvictionReasons{Quota: 6, Idle: 1}, map[string]int64{"quota": 6, "idle": 1}},
		{"stats behind the store", map[string]int64{"size": 3, "age": 2}, &wire.EvictionReasons{Size: 2, Age: 2}, map[string]int64{"size": 3, "age": 2}},
		{"not tracked by the stats", map[string]int64{"quota": 4}, nil, map[string]int64{"quota": 4}},
		{"none", nil, nil, nil},
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
			persisted := map[string]wire.EvictionReasons{}
			if tc.persisted != nil {
				persisted["team-a"] = *tc.persisted
			}
			nss := []wire.NamespaceUsage{u}
			withPersistedEvictions(nss, persisted)
			got := nss[0]
			wantEv := tc.want["size"] + tc.want["quota"]
			wantEx := tc.want["idle"] + tc.want["age"]
			if !reflect.DeepEqual(got.EvictionsByReason, tc.want) || got.Evictions != wantEv || got.Expirations != wantEx {
				t.Errorf("got %+v, want by reason %v (%d evictions, %d expirations)", got, tc.want, wantEv, wantEx)
			}
		})
	}
}
