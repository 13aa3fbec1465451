package api

import (
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/wire"
)

// withPersistedEvictions raises each namespace's eviction and expiry counts
// in nss to the persisted ones (persisted, by namespace, from the
// statistics), reason by reason. The store counts since it opened, so its
// own counts start again at 0 with every restart; the statistics keep them
// as they keep hits and misses. The larger of the two is reported: the
// statistics lag the store until their next merge, and a namespace they
// fold into _other (past their bound) has no persisted row, so the store's
// count is then the best there is. Both only grow, so the result does too.
func withPersistedEvictions(nss []wire.NamespaceUsage, persisted map[string]nsEvictions) {
	for i := range nss {
		p, ok := persisted[nss[i].Namespace]
		if !ok {
			continue
		}
		u := &nss[i]
		var e wire.EvictionReasons
		for _, r := range evictionReasons {
			*e.Of(r) = max(*p.Of(r), u.EvictionsByReason[r])
		}
		u.Evictions, u.Expirations = e.Evictions()+p.unattributed, e.Expirations()
		u.EvictionsByReason = reasonMap(e)
	}
}

// nsEvictions are a namespace's persisted evictions: by reason, and those
// a build from before reasons were recorded (2026-12-03) persisted, which
// have none. Those count in the namespace's evictions (as in its
// statistics' totals, wire.Totals.Evictions) and in no reason, so that an
// upgrade does not show a namespace that had evictions as having none.
type nsEvictions struct {
	wire.EvictionReasons
	unattributed int64
}

// byReason returns persisted evictions that all have a reason (the
// metrics' per-reason counts) as nsEvictions.
func byReason(m map[string]wire.EvictionReasons) map[string]nsEvictions {
	out := make(map[string]nsEvictions, len(m))
	for ns, e := range m {
		out[ns] = nsEvictions{EvictionReasons: e}
	}
	return out
}

// reasonMap returns e as NamespaceUsage.EvictionsByReason: the reasons
// that happened, nil for none.
func reasonMap(e wire.EvictionReasons) map[string]int64 {
	var m map[string]int64
	for _, r := range evictionReasons {
		if n := *e.Of(r); n != 0 {
			if m == nil {
				m = make(map[string]int64, len(evictionReasons))
			}
			m[r] = n
		}
	}
	return m
}

// persistedEvictions returns each namespace's persisted evictions from a
// snapshot's namespace totals: by reason, and those counted without one.
func persistedEvictions(nss []stats.NamespaceTotals) map[string]nsEvictions {
	out := make(map[string]nsEvictions, len(nss))
	for _, n := range nss {
		e := nsEvictions{EvictionReasons: n.EvictionsByReason}
		e.unattributed = max(0, n.Evictions-e.Evictions()-e.Expirations())
		if e != (nsEvictions{}) {
			out[n.Namespace] = e
		}
	}
	return out
}
