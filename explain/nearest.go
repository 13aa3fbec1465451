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
	gk := groupKey{ns, backend, want[KindComponent]}
	x.mu.RLock()
	if g := x.groups[gk]; g != nil && g.unsorted {
		// Sorted once after seeding (and after writes out of order),
		// under the write lock; a write racing in between only costs
		// this explanation its early stop.
		x.mu.RUnlock()
		x.mu.Lock()
		if g := x.groups[gk]; g != nil && g.unsorted {
			g.sortByCreated()
		}
		x.mu.Unlock()
		x.mu.RLock()
	}
	defer x.mu.RUnlock()
	g := x.groups[gk]
	n := 0
	if g != nil {
		n = g.live
	}
	if n == 0 && len(want) > 0 {
		if others := x.lenOf(ns, backend); others > 0 {
			return firstOfKind(want, others)
		}
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
	minExtra := int32(math.MaxInt32)
	for i, set := range g.sets {
		for _, nid := range set {
			if !wantNames[nid] {
				extra[i]++
			}
		}
		minExtra = min(minExtra, extra[i])
	}
	// cnt is all zeros between calls: only the ids of the posting lists
	// counted are touched, and they are zeroed again before it goes back.
	cp := counts.Get().(*[]uint16)
	defer counts.Put(cp)
	if cap(*cp) < len(g.entries) {
		*cp = make([]uint16, len(g.entries))
	}
	cnt := (*cp)[:len(g.entries)]
	// A term every entry id has (the jax version of every entry) adds one
	// to all: counted once. Terms are at most MaxComponents (64) per entry
	// and distinct per name, so the counter's low 15 bits cannot overflow;
	// the top bit marks an entry already compared.
	const compared = 0x8000
	base := int32(0)
	lists := make([][]uint32, 0, len(matched))
	var common []uint32 // sorted term ids
	for _, tid := range matched {
		p := g.terms[tid].postings
		switch {
		case len(p) == len(g.entries):
			base++
		case len(p) > x.commonList:
			common = append(common, tid)
		default:
			lists = append(lists, p)
			for _, id := range p {
				cnt[id]++
			}
		}
	}
	slices.Sort(common)
	defer func() {
		for _, p := range lists {
			for _, id := range p {
				cnt[id] = 0
			}
		}
	}()
	// commonShared is how many of the common terms entry id has.
	commonShared := func(id uint32) int32 {
		if len(common) == 0 {
			return 0
		}
		n, ts, cs := int32(0), g.entries[id].terms, common
		for len(ts) > 0 && len(cs) > 0 {
			switch {
			case ts[0] < cs[0]:
				ts = ts[1:]
			case ts[0] > cs[0]:
				cs = cs[1:]
			default:
				n++
				ts, cs = ts[1:], cs[1:]
			}
		}
		return n
	}
	type scored struct {
		id      uint32
		d       int32
		created int64
	}
	best := make([]scored, 0, MaxNearest+1)
	nw := int32(len(want)) - base
	// consider keeps id among the best if it is nearer than the farthest
	// kept; shared is the number of counted terms it shares with want.
	consider := func(id uint32, set uint32, shared int32) {
		created := g.created[id]
		floor := nw - shared - int32(len(common)) + extra[set]
		if floor <= 0 && len(common) == 0 {
			return // identical
		}
		if len(best) == MaxNearest {
			w := best[MaxNearest-1]
			if floor > w.d || floor == w.d && created <= w.created {
				return // cannot be nearer even sharing every common term
			}
		}
		d := floor + int32(len(common)) - commonShared(id)
		if d <= 0 {
			return
		}
		if len(best) == MaxNearest {
			w := best[MaxNearest-1]
			if d > w.d || d == w.d && created <= w.created {
				return
			}
		}
		i := sort.Search(len(best), func(i int) bool {
			if best[i].d != d {
				return best[i].d > d
			}
			return best[i].created < created
		})
		best = slices.Insert(best, i, scored{id, d, created})
		if len(best) > MaxNearest {
			best = best[:MaxNearest]
		}
	}
	// First the entries that share a counted term.
	for _, p := range lists {
		for _, id := range p {
			c := cnt[id]
			if c&compared != 0 {
				continue
			}
			cnt[id] = c | compared
			if set := g.setOf[id]; set != removed {
				consider(id, set, int32(c))
			}
		}
	}
	// Then the others, newest first. Each differs in at least floor
	// components; once the nearest found differ in fewer, or in as many
	// and every entry left is older, none left can be nearer: a miss near
	// an old entry stops after a few entries instead of scanning the group.
	floor := nw - int32(len(common)) + minExtra
	ordered := !g.unsorted
	for i := len(g.byCreated) - 1; i >= 0; i-- {
		id := g.byCreated[i]
		if len(best) == MaxNearest {
			w := best[MaxNearest-1]
			if w.d < floor || ordered && w.d == floor && g.created[id] <= w.created {
				break
			}
		}
		if set := g.setOf[id]; set != removed && cnt[id] == 0 {
			consider(id, set, 0)
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
