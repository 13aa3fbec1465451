package stats

import (
	"sort"

	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/wire"
)

// Miss is the wire type of the same name (wire).
type Miss = wire.Miss

// ReasonCount is the wire type of the same name (wire).
type ReasonCount = wire.ReasonCount

// maxReasonsPerNamespace bounds the distinct reasons counted per namespace.
const maxReasonsPerNamespace = 64

// missRing is a fixed-capacity ring of the most recent misses.
type missRing struct {
	items []Miss
	next  int
}

func (r *missRing) push(m Miss, capacity int) {
	if len(r.items) < capacity {
		r.items = append(r.items, m)
		return
	}
	r.items[r.next] = m
	r.next = (r.next + 1) % len(r.items)
}

// newestFirst returns up to n misses, newest first.
func (r *missRing) newestFirst(n int) []Miss {
	out := make([]Miss, 0, min(n, len(r.items)))
	for i := 0; i < len(r.items) && len(out) < n; i++ {
		j := (r.next - 1 - i + 2*len(r.items)) % len(r.items)
		out = append(out, r.items[j])
	}
	return out
}

// Explain explains a miss of a signature with components want in (ns,
// backend) against the indexed entries.
func (s *Stats) Explain(ns, backend string, want map[string]string) explain.Explanation {
	return s.index.Explain(ns, BackendOrUnknown(backend), want)
}

// RecordMiss keeps m among the namespace's recent misses and counts its
// reason. The lookup itself is counted by RecordLookup. It does no I/O.
// Every string of m is copied and made valid: see sanitizeMiss.
func (s *Stats) RecordMiss(m Miss) {
	if s.closed.Load() {
		return
	}
	if m.Time.IsZero() {
		m.Time = s.cfg.Now()
	}
	m = sanitizeMiss(m)
	// Kept under Other when the namespace is not admitted: see
	// AdmitNamespace.
	ns := s.namespaces.labelOf(m.Namespace)
	reason := reasonLabel(m.Explanation.Reason)
	a := &s.agg
	a.missMu.Lock()
	defer a.missMu.Unlock()
	r := a.misses[ns]
	if r == nil {
		r = &missRing{}
		a.misses[ns] = r
	}
	r.push(m, s.cfg.MissesPerNamespace)
	rc := a.reasons[ns]
	if rc == nil {
		rc = make(map[string]int64)
		a.reasons[ns] = rc
	}
	if _, ok := rc[reason]; !ok && len(rc) >= maxReasonsPerNamespace {
		reason = Other
	}
	rc[reason]++
	a.dirtyMisses[ns] = true
}

// MissReport is the wire type of the same name (wire).
type MissReport = wire.MissReport

// Misses returns up to limit recent misses of ns, newest first, and the
// namespace's miss counts by reason.
func (s *Stats) Misses(ns string, limit int) MissReport {
	if limit <= 0 {
		limit = s.cfg.MissesPerNamespace
	}
	a := &s.agg
	a.missMu.Lock()
	defer a.missMu.Unlock()
	rep := MissReport{Namespace: ns, ByReason: reasonCounts(a.reasons[ns]), Recent: []Miss{}}
	for _, rc := range rep.ByReason {
		rep.Total += rc.Count
	}
	if r := a.misses[ns]; r != nil {
		rep.Recent = r.newestFirst(limit)
	}
	return rep
}

// reasonCounts sorts a reason map by count, descending.
func reasonCounts(m map[string]int64) []ReasonCount {
	out := make([]ReasonCount, 0, len(m))
	for r, n := range m {
		out = append(out, ReasonCount{Reason: r, Label: explain.ReasonLabel(r), Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}
