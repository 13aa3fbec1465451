package stats

import (
	"sort"
	"time"
)

// MergeOptions bound a merged Snapshot. The zero value means the defaults.
type MergeOptions struct {
	// MaxRuns and MaxTopEntries bound the merged lists; defaults 100 and 20,
	// as in SnapshotOptions.
	MaxRuns       int
	MaxTopEntries int
	// Now stamps GeneratedAt; zero means time.Now.
	Now time.Time
}

// MergeSnapshots adds up snapshots of several replicas into one: totals per
// namespace × backend and per backend, runs merged by name (counters
// summed, first and last seen widened, namespaces united), top entries
// merged by namespace and key (hits and seconds saved summed) and
// re-ranked, miss reasons summed by reason, and the store counters summed
// (each replica's hot tier is its own). Hit rates are recomputed from the
// sums. Counts saturate instead of wrapping, as in the Counters they come
// from. It does no I/O and does not modify its arguments.
func MergeSnapshots(snaps []Snapshot, opt MergeOptions) Snapshot {
	if opt.MaxRuns <= 0 {
		opt.MaxRuns = 100
	}
	if opt.MaxTopEntries <= 0 {
		opt.MaxTopEntries = 20
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	out := Snapshot{
		GeneratedAt: opt.Now.UTC(),
		Namespaces:  []NamespaceTotals{},
		Backends:    []BackendTotals{},
		Runs:        []RunTotals{},
		TopEntries:  []TopEntry{},
	}
	type nsTotals struct {
		t        Totals
		backends map[string]*Totals
	}
	namespaces := map[string]*nsTotals{}
	backends := map[string]*Totals{}
	runs := map[string]*RunTotals{}
	entries := map[[2]string]*TopEntry{}
	reasons := map[string]*ReasonCount{}
	for i := range snaps {
		s := &snaps[i]
		addTotals(&out.Totals, s.Totals)
		for _, n := range s.Namespaces {
			m := namespaces[n.Namespace]
			if m == nil {
				m = &nsTotals{backends: map[string]*Totals{}}
				namespaces[n.Namespace] = m
			}
			addTotals(&m.t, n.Totals)
			for _, b := range n.Backends {
				addTotals(totalsOf(m.backends, b.Backend), b.Totals)
			}
		}
		for _, b := range s.Backends {
			addTotals(totalsOf(backends, b.Backend), b.Totals)
		}
		for _, r := range s.Runs {
			m := runs[r.Run]
			if m == nil {
				m = &RunTotals{Run: r.Run, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
				runs[r.Run] = m
			}
			if r.FirstSeen.Before(m.FirstSeen) {
				m.FirstSeen = r.FirstSeen
			}
			if r.LastSeen.After(m.LastSeen) {
				m.LastSeen = r.LastSeen
			}
			m.FirstHit = earliest(m.FirstHit, r.FirstHit)
			for _, ns := range r.Namespaces {
				if !contains(m.Namespaces, ns) && len(m.Namespaces) < maxRunNamespaces {
					m.Namespaces = append(m.Namespaces, ns)
				}
			}
			addTotals(&m.Totals, r.Totals)
		}
		for _, e := range s.TopEntries {
			k := [2]string{e.Namespace, e.Key}
			m := entries[k]
			if m == nil {
				c := e
				c.Hits, c.SecondsSaved, c.LastHit = 0, 0, time.Time{}
				m = &c
				entries[k] = m
			}
			m.Hits = satAdd(m.Hits, e.Hits)
			m.SecondsSaved += e.SecondsSaved
			if e.LastHit.After(m.LastHit) {
				m.LastHit = e.LastHit
			}
		}
		for _, r := range s.MissReasons {
			m := reasons[r.Reason]
			if m == nil {
				m = &ReasonCount{Reason: r.Reason, Label: r.Label}
				reasons[r.Reason] = m
			}
			m.Count = satAdd(m.Count, r.Count)
		}
		g := &out.StoreCounters
		g.Evictions = satAdd(g.Evictions, s.StoreCounters.Evictions)
		g.IntegrityFailures = satAdd(g.IntegrityFailures, s.StoreCounters.IntegrityFailures)
		g.StoreBytes = satAdd(g.StoreBytes, s.StoreCounters.StoreBytes)
		g.StoreEntries = satAdd(g.StoreEntries, s.StoreCounters.StoreEntries)
		g.MaxBytes = satAdd(g.MaxBytes, s.StoreCounters.MaxBytes)
	}
	for ns, m := range namespaces {
		n := NamespaceTotals{Namespace: ns, Totals: m.t, Backends: []BackendTotals{}}
		for b, t := range m.backends {
			n.Backends = append(n.Backends, BackendTotals{Backend: b, Totals: *t})
		}
		sort.Slice(n.Backends, func(i, j int) bool { return n.Backends[i].Backend < n.Backends[j].Backend })
		out.Namespaces = append(out.Namespaces, n)
	}
	sort.Slice(out.Namespaces, func(i, j int) bool { return out.Namespaces[i].Namespace < out.Namespaces[j].Namespace })
	for b, t := range backends {
		out.Backends = append(out.Backends, BackendTotals{Backend: b, Totals: *t})
	}
	sort.Slice(out.Backends, func(i, j int) bool { return out.Backends[i].Backend < out.Backends[j].Backend })
	for _, r := range runs {
		sort.Strings(r.Namespaces)
		out.Runs = append(out.Runs, *r)
	}
	// The same orders as Snapshot: runs by last activity, entries by time
	// saved, reasons by count.
	sort.Slice(out.Runs, func(i, j int) bool {
		if !out.Runs[i].LastSeen.Equal(out.Runs[j].LastSeen) {
			return out.Runs[i].LastSeen.After(out.Runs[j].LastSeen)
		}
		return out.Runs[i].Run < out.Runs[j].Run
	})
	if len(out.Runs) > opt.MaxRuns {
		out.Runs = out.Runs[:opt.MaxRuns]
	}
	for _, e := range entries {
		out.TopEntries = append(out.TopEntries, *e)
	}
	sort.Slice(out.TopEntries, func(i, j int) bool {
		a, b := out.TopEntries[i], out.TopEntries[j]
		if a.SecondsSaved != b.SecondsSaved {
			return a.SecondsSaved > b.SecondsSaved
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Key < b.Key
	})
	if len(out.TopEntries) > opt.MaxTopEntries {
		out.TopEntries = out.TopEntries[:opt.MaxTopEntries]
	}
	out.MissReasons = []ReasonCount{}
	for _, r := range reasons {
		out.MissReasons = append(out.MissReasons, *r)
	}
	sort.Slice(out.MissReasons, func(i, j int) bool {
		if out.MissReasons[i].Count != out.MissReasons[j].Count {
			return out.MissReasons[i].Count > out.MissReasons[j].Count
		}
		return out.MissReasons[i].Reason < out.MissReasons[j].Reason
	})
	return out
}

// totalsOf returns m[k], creating it.
func totalsOf(m map[string]*Totals, k string) *Totals {
	t := m[k]
	if t == nil {
		t = new(Totals)
		m[k] = t
	}
	return t
}

// addTotals adds o to t and recomputes t's hit rate.
func addTotals(t *Totals, o Totals) {
	t.Lookups = satAdd(t.Lookups, o.Lookups)
	t.Hits = satAdd(t.Hits, o.Hits)
	t.Misses = satAdd(t.Misses, o.Misses)
	t.WaitHits = satAdd(t.WaitHits, o.WaitHits)
	t.BytesIn = satAdd(t.BytesIn, o.BytesIn)
	t.BytesOut = satAdd(t.BytesOut, o.BytesOut)
	t.Writes = satAdd(t.Writes, o.Writes)
	t.Evictions = satAdd(t.Evictions, o.Evictions)
	addReasons(&t.EvictionsByReason, o.EvictionsByReason)
	t.CompileSecondsSaved += o.CompileSecondsSaved
	t.HitRate = 0
	if t.Lookups > 0 {
		t.HitRate = float64(t.Hits) / float64(t.Lookups)
	}
}
