package explain

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// counts holds per-entry counters for Explain, reused across calls so that
// a miss in a large group does not allocate its size each time.
var counts = sync.Pool{New: func() any { return new([]uint16) }}

// Explain explains a miss of a signature with components want in (ns,
// backend) against every indexed entry of the group, exactly as Explain
// would with all of them as candidates. When entries have left the group at
// its bound (IndexConfig) the summary says the explanation is approximate.
func (x *Index) Explain(ns, backend string, want map[string]string) Explanation {
	x.mu.RLock()
	defer x.mu.RUnlock()
	g := x.groups[groupKey{ns, backend}]
	n := 0
	if g != nil {
		n = g.live
	}
	if ex, ok := special(want, n); ok {
		return ex
	}
	ex := explanation(g.live, g.nearest(x, want))
	if g.dropped > 0 {
		ex.Summary += fmt.Sprintf(" (Approximate: %d older entries of this backend left the comparison index at its bound; %d were compared.)", g.dropped, g.live)
	}
	return ex
}

// nearest returns up to MaxNearest entries differing from want in the
// fewest components, newest first among equals, skipping entries with no
// difference.
//
// The number of components an entry e differs in is
//
//	|want| - shared(e) + |names(e) \ names(want)|
//
// where shared(e) is the number of (name, value) terms e has in common with
// want: it is counted over want's posting lists, and the last part is
// computed once per name set.
func (g *group) nearest(x *Index, want map[string]string) []Nearest {
	// want's terms that some entry has.
	wantNames := make(map[uint32]bool, len(want))
	matched := make([]uint32, 0, len(want))
	for n, v := range want {
		nid, ok := g.nameIDs[n]
		if !ok {
			continue
		}
		wantNames[nid] = true
		if tid, ok := g.termIDs[x.hash(n, v)]; ok && g.terms[tid].name == nid {
			matched = append(matched, tid)
		}
	}
	extra := make([]int32, len(g.sets))
	for i, set := range g.sets {
		for _, nid := range set {
			if !wantNames[nid] {
				extra[i]++
			}
		}
	}
	cp := counts.Get().(*[]uint16)
	defer counts.Put(cp)
	if cap(*cp) < len(g.entries) {
		*cp = make([]uint16, len(g.entries))
	}
	cnt := (*cp)[:len(g.entries)]
	clear(cnt)
	// A term every entry id has (the jax version of every entry) adds one
	// to all: counted once. Terms are at most MaxComponents (64) per entry
	// and distinct per name, so a uint16 counter cannot overflow.
	base := int32(0)
	for _, tid := range matched {
		p := g.terms[tid].postings
		if len(p) == len(g.entries) {
			base++
			continue
		}
		for _, id := range p {
			cnt[id]++
		}
	}
	type scored struct {
		id      uint32
		d       int32
		created int64
	}
	best := make([]scored, 0, MaxNearest+1)
	nw := int32(len(want))
	// Newest first: entries are mostly written in time order, so among
	// equals the newest come first and the rest are rejected at a glance.
	for id := len(g.entries) - 1; id >= g.oldest; id-- {
		set := g.setOf[id]
		if set == removed {
			continue
		}
		d := nw - base - int32(cnt[id]) + extra[set]
		if d <= 0 {
			continue
		}
		created := g.created[id]
		if len(best) == MaxNearest {
			w := best[MaxNearest-1]
			if d > w.d || d == w.d && created <= w.created {
				continue
			}
		}
		s := scored{uint32(id), d, created}
		i := sort.Search(len(best), func(i int) bool {
			if best[i].d != d {
				return best[i].d > d
			}
			return best[i].created < created
		})
		best = slices.Insert(best, i, s)
		if len(best) > MaxNearest {
			best = best[:MaxNearest]
		}
	}
	out := make([]Nearest, 0, len(best))
	for _, b := range best {
		e := &g.entries[b.id]
		out = append(out, Nearest{Key: e.key, Name: e.name, Created: fromUnixNano(b.created), Diffs: g.diffs(x, want, e)})
	}
	return out
}

// diffs is Compare(want, e's components) from what e keeps: a component is
// equal when want's (name, value) is e's term.
func (g *group) diffs(x *Index, want map[string]string, e *entry) []Diff {
	var diffs []Diff
	has := make(map[string]bool, len(e.terms))
	for _, tid := range e.terms {
		t := &g.terms[tid]
		name := g.names[t.name]
		has[name] = true
		w, ok := want[name]
		if !ok {
			diffs = append(diffs, makeDiffShown(name, "", t.shown, false, true))
			continue
		}
		if same, ok := g.termIDs[x.hash(name, w)]; ok && same == tid {
			continue
		}
		diffs = append(diffs, makeDiffShown(name, w, t.shown, false, false))
	}
	for name, w := range want {
		if !has[name] {
			diffs = append(diffs, makeDiffShown(name, w, shown{short: true}, true, false))
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Component < diffs[j].Component })
	return diffs
}

// noTime stands for a zero created time, whose UnixNano is undefined.
const noTime = math.MinInt64

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return noTime
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == noTime {
		return time.Time{}
	}
	return time.Unix(0, n)
}
