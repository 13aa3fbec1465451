package api

import (
	"sort"

	"github.com/cachesvc/cachesvc/wire"
)

// maxStatsNamespaces bounds store.namespaces in GET /v1/stats: past it, the
// namespaces the answer does not name are summed in one "_other" row. A
// server of tens of thousands of namespaces answered megabytes, and the
// dashboard, which polls it every 3 s, drew a row for each.
const maxStatsNamespaces = 256

// boundUsage returns all (sorted by name) if it has at most max
// namespaces. Otherwise it keeps those with a quota, then those named in
// keep (the namespaces the statistics track, whose table rows show their
// usage), then the largest by bytes, up to max; sorts them by name and
// appends one otherNamespace row ("_other", a name no namespace can have)
// with the sum of the rest's entries, bytes,
// evictions and expirations.
func boundUsage(all []wire.NamespaceUsage, keep map[string]bool, max int) []wire.NamespaceUsage {
	if len(all) <= max {
		return all
	}
	rank := func(u wire.NamespaceUsage) int {
		switch {
		case u.MaxBytes > 0 || u.MaxEntries > 0 || u.MaxIdleSeconds > 0 || u.MaxAgeSeconds > 0:
			return 0
		case keep[u.Namespace]:
			return 1
		}
		return 2
	}
	order := append([]wire.NamespaceUsage(nil), all...)
	sort.SliceStable(order, func(i, j int) bool {
		ri, rj := rank(order[i]), rank(order[j])
		if ri != rj {
			return ri < rj
		}
		return order[i].Bytes > order[j].Bytes
	})
	out := order[:max:max]
	other := wire.NamespaceUsage{Namespace: otherNamespace}
	for _, u := range order[max:] {
		other.Entries += u.Entries
		other.Bytes += u.Bytes
		other.Evictions += u.Evictions
		other.Expirations += u.Expirations
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return append(out, other)
}
