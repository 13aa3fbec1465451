package explain

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// IndexConfig bounds an Index. The zero value means the defaults.
//
// Memory: an indexed entry costs its key and display name, ~100 bytes of
// bookkeeping, and 8 bytes per component (a uint32 term id in the entry and
// a uint32 entry id in the term's posting list); a component value that no
// other entry shares (a module digest) adds ~100 bytes more for its term
// (the 8-byte value hash, the shown value of at most MaxShortValue bytes,
// the posting list). BenchmarkExplainMiss reports the measured heap bytes
// per entry: ~440-450 with xla-like entries of ten components, each with its
// own module digest, at 82,000 to 1M entries. At the default MaxEntries that
// is ~470 MB at most. Removed entries are compacted away once they outnumber
// the live ones: a group holds at most about twice what its live entries
// need, and the compaction (O(entries), under the write lock) is amortized
// over the removals.
type IndexConfig struct {
	// PerGroup bounds the entries kept per (namespace, backend, kind). At the
	// bound the least recently written entry of the group leaves the index,
	// and the group's explanations say they are approximate. Default
	// MaxEntries. (Entries seeded at start come in the store's key order:
	// when a group holds more than the bound then, which of them stay is
	// not by age.)
	PerGroup int
	// MaxEntries bounds the entries kept in all groups together. At the
	// bound the least recently written entry of the largest group leaves
	// the index. Default 1<<20 (1,048,576).
	MaxEntries int
	// MaxGroups bounds the number of (namespace, backend, kind) groups (see
	// KindComponent); once full, entries of new groups are not indexed.
	// Default 1024: a namespace of torch entries makes a group per kind (up
	// to eight), so 256 (namespace, backend) groups need that many.
	MaxGroups int
}

// DefaultMaxEntries is IndexConfig.MaxEntries by default.
const DefaultMaxEntries = 1 << 20

// Index keeps the components of stored entries per (namespace, backend), so
// that a miss is explained by the entries nearest to it — those differing in
// the fewest components — among all indexed ones, without walking the store.
//
// Each group is an inverted index: every distinct (component name, value) is
// a term, identified by a 64-bit hash of the pair (two pairs that collide,
// with probability ~2^-64 per pair, compare as equal), holding the posting
// list of the entries that have it. Finding the nearest entries counts, per
// entry, the terms it shares with the miss over the miss's posting lists
// (a term every entry shares, like the jax version, is counted once for all),
// so it is exact at any size and costs O(entries) small integer operations.
// See IndexConfig for the memory bound.
//
// It is safe for concurrent use.
type Index struct {
	mu     sync.RWMutex
	cfg    IndexConfig
	seed   maphash.Seed
	groups map[groupKey]*group
	// kinds lists the groups of each (namespace, backend), one per kind
	// (a few at most), so that a write or a removal visits those and not
	// every group. Groups are never deleted.
	kinds map[[2]string][]*group
	live  int // entries indexed in all groups
	// dropped counts the entries that left at the bound, in all groups.
	dropped int64
	// commonList is the length above which a posting list (a flag value a
	// third of the entries share) is not counted: the entries found
	// through the others are checked against it one by one, and so are the
	// entries the scan for the nearest reaches. A field for tests.
	commonList int
}

// groupKey is one comparison group: a namespace's entries of one backend
// and one kind (their KindComponent value, "" when they have none).
type groupKey struct{ ns, backend, kind string }

// KindComponent names the component that says what kind of artifact an
// entry is: pt2's "cache" (an FX graph, an AOTAutograd entry, a C++
// library, a Mega-Cache blob, ...). Entries of different kinds are
// different things, not near misses of each other: a miss is compared only
// with entries of its own kind (a C++ library's miss was explained by the
// "nearest" FX graph, every component differing).
const KindComponent = "cache"

// NewIndex returns an empty index.
func NewIndex(cfg IndexConfig) *Index {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.PerGroup <= 0 {
		cfg.PerGroup = cfg.MaxEntries
	}
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 1024
	}
	return &Index{cfg: cfg, seed: maphash.MakeSeed(), groups: make(map[groupKey]*group), kinds: make(map[[2]string][]*group), commonList: 4096}
}

// entry is one indexed entry; its id is its position in group.entries, in
// the order entries were written (a re-written key gets a new id).
type entry struct {
	key   string
	name  string
	terms []uint32 // sorted term ids; nil once removed
}

// term is one (component name, value) pair.
type term struct {
	name     uint32 // index into group.names
	shown    shown
	postings []uint32 // ids of the entries with this term, ascending; removed ones stay until compaction
}

// group is the inverted index of one (namespace, backend).
type group struct {
	entries []entry
	// setOf and created are per entry id, apart from entries so that the
	// scan for the nearest entries reads 12 bytes per entry: setOf is the
	// entry's name set (see sets), or removed; created is in Unix
	// nanoseconds (noTime when zero).
	setOf   []uint32
	created []int64
	// byCreated is every id, removed ones included until compaction, by
	// created ascending once sorted (unsorted false): entries written now
	// come in order, those seeded from the store at start do not, and
	// Explain sorts it on first use.
	byCreated []uint32
	unsorted  bool
	keys      map[string]uint32
	terms     []term
	termIDs   map[uint64]uint32
	names     []string
	nameIDs   map[string]uint32
	// sets are the distinct sets of component names (sorted name ids):
	// entries of a backend share a few, so the components a miss has that
	// an entry lacks, and the reverse, are counted once per set.
	sets   [][]uint32
	setIDs map[string]uint32
	oldest int // no entry below this id is live
	live   int
	// dropped counts entries that left at the bound: explanations are
	// approximate once it is non-zero.
	dropped int
}

func newGroup() *group {
	return &group{keys: make(map[string]uint32), termIDs: make(map[uint64]uint32),
		nameIDs: make(map[string]uint32), setIDs: make(map[string]uint32)}
}

// hash identifies the term (name, value).
func (x *Index) hash(name, value string) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	h.WriteString(name)
	h.WriteByte(0)
	h.WriteString(value)
	return h.Sum64()
}

// Add records the components of entry key in (ns, backend), replacing those
// it had. Entries without components are ignored. Every string is copied,
// so callers may pass strings backed by reused buffers.
func (x *Index) Add(ns, backend, key, name string, created time.Time, components map[string]string) {
	if len(components) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	kind := components[KindComponent]
	gk := groupKey{ns, backend, kind}
	g := x.groups[gk]
	if g == nil {
		if len(x.groups) >= x.cfg.MaxGroups {
			return
		}
		g = newGroup()
		ns, backend = strings.Clone(ns), strings.Clone(backend)
		x.groups[groupKey{ns, backend, strings.Clone(kind)}] = g
		x.kinds[[2]string{ns, backend}] = append(x.kinds[[2]string{ns, backend}], g)
	}
	// A key re-written with another kind leaves its old group.
	for _, og := range x.kinds[[2]string{ns, backend}] {
		if og != g {
			x.remove(og, key)
		}
	}
	if id, ok := g.keys[key]; ok {
		g.kill(id)
		x.live--
	}
	id := uint32(len(g.entries))
	e := entry{key: strings.Clone(key), name: strings.Clone(name), terms: make([]uint32, 0, len(components))}
	names := make([]uint32, 0, len(components))
	for n, v := range components {
		nid := g.nameID(n)
		names = append(names, nid)
		h := x.hash(n, v)
		tid, ok := g.termIDs[h]
		if !ok {
			tid = uint32(len(g.terms))
			g.terms = append(g.terms, term{name: nid, shown: shownOf(strings.Clone(v))})
			g.termIDs[h] = tid
		}
		g.terms[tid].postings = append(g.terms[tid].postings, id)
		e.terms = append(e.terms, tid)
	}
	slices.Sort(e.terms)
	g.entries = append(g.entries, e)
	g.setOf = append(g.setOf, g.setID(names))
	g.appendCreated(unixNano(created))
	g.keys[e.key] = id
	g.live++
	x.live++
	for g.live > x.cfg.PerGroup {
		g.dropOldest()
		x.live--
		x.dropped++
	}
	for x.live > x.cfg.MaxEntries {
		big := x.largest()
		big.dropOldest()
		x.live--
		x.dropped++
		big.maybeCompact()
	}
	g.maybeCompact()
}

// largest returns the group with the most entries.
func (x *Index) largest() *group {
	var big *group
	for _, g := range x.groups {
		if big == nil || g.live > big.live {
			big = g
		}
	}
	return big
}

func (g *group) nameID(n string) uint32 {
	if id, ok := g.nameIDs[n]; ok {
		return id
	}
	id := uint32(len(g.names))
	n = strings.Clone(n)
	g.names = append(g.names, n)
	g.nameIDs[n] = id
	return id
}

// setID interns the set of name ids (sorted in place).
func (g *group) setID(names []uint32) uint32 {
	slices.Sort(names)
	b := make([]byte, 4*len(names))
	for i, n := range names {
		binary.LittleEndian.PutUint32(b[4*i:], n)
	}
	if id, ok := g.setIDs[string(b)]; ok {
		return id
	}
	id := uint32(len(g.sets))
	g.sets = append(g.sets, names)
	g.setIDs[string(b)] = id
	return id
}

func (g *group) appendCreated(c int64) {
	if n := len(g.byCreated); n > 0 && g.created[g.byCreated[n-1]] > c {
		g.unsorted = true
	}
	g.byCreated = append(g.byCreated, uint32(len(g.created)))
	g.created = append(g.created, c)
}

// sortByCreated sorts byCreated (ties by id).
func (g *group) sortByCreated() {
	slices.SortFunc(g.byCreated, func(a, b uint32) int {
		if c := cmp.Compare(g.created[a], g.created[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	g.unsorted = false
}

// removed is setOf of a removed entry.
const removed = ^uint32(0)

// kill removes entry id; its ids in posting lists stay until compaction.
func (g *group) kill(id uint32) {
	e := &g.entries[id]
	delete(g.keys, e.key)
	*e = entry{}
	g.setOf[id] = removed
	g.live--
}

// dropOldest removes the least recently written live entry, at the bound.
func (g *group) dropOldest() {
	for g.entries[g.oldest].terms == nil {
		g.oldest++
	}
	g.kill(uint32(g.oldest))
	g.dropped++
}

// maybeCompact rebuilds the group without its removed entries once they
// outnumber the live ones (and 1024), so that a group's memory stays within
// about twice what its live entries need and the cost of rebuilding is
// amortized over the removals.
func (g *group) maybeCompact() {
	dead := len(g.entries) - g.live
	if dead <= 1024 || dead <= g.live {
		return
	}
	old := *g
	*g = *newGroup()
	g.dropped = old.dropped
	g.entries = make([]entry, 0, old.live)
	g.setOf = make([]uint32, 0, old.live)
	g.created = make([]int64, 0, old.live)
	g.byCreated = make([]uint32, 0, old.live)
	termMap := make(map[uint32]uint32)
	for oid, e := range old.entries[old.oldest:] {
		if e.terms == nil {
			continue
		}
		oid += old.oldest
		id := uint32(len(g.entries))
		names := make([]uint32, 0, len(e.terms))
		for i, ot := range e.terms {
			t := &old.terms[ot]
			nid := g.nameID(old.names[t.name])
			names = append(names, nid)
			tid, ok := termMap[ot]
			if !ok {
				tid = uint32(len(g.terms))
				g.terms = append(g.terms, term{name: nid, shown: t.shown})
				termMap[ot] = tid
			}
			g.terms[tid].postings = append(g.terms[tid].postings, id)
			e.terms[i] = tid
		}
		slices.Sort(e.terms)
		g.entries = append(g.entries, e)
		g.setOf = append(g.setOf, g.setID(names))
		g.appendCreated(old.created[oid])
		g.keys[e.key] = id
		g.live++
	}
	for h, ot := range old.termIDs {
		if tid, ok := termMap[ot]; ok {
			g.termIDs[h] = tid
		}
	}
}

// Remove forgets entry key in (ns, backend), whatever its kind, e.g. after
// a delete or an eviction. A missing key is ignored.
func (x *Index) Remove(ns, backend, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, g := range x.kinds[[2]string{ns, backend}] {
		x.remove(g, key)
	}
}

// Forget forgets entry key in ns whatever its backend, for callers that do
// not know it (a delete by key). A missing key is ignored.
func (x *Index) Forget(ns, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for gk, g := range x.groups {
		if gk.ns == ns {
			x.remove(g, key)
		}
	}
}

func (x *Index) remove(g *group, key string) {
	if g == nil {
		return
	}
	if id, ok := g.keys[key]; ok {
		g.kill(id)
		x.live--
		g.maybeCompact()
	}
}

// Len returns the number of indexed entries in (ns, backend), of all kinds.
func (x *Index) Len(ns, backend string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.lenOf(ns, backend)
}

// lenOf is Len with x.mu held.
func (x *Index) lenOf(ns, backend string) int {
	n := 0
	for _, g := range x.kinds[[2]string{ns, backend}] {
		n += g.live
	}
	return n
}

// Entries returns the number of indexed entries in all groups (at most
// IndexConfig.MaxEntries).
func (x *Index) Entries() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live
}

// Dropped returns the number of entries that left the index at its bound
// since it was made.
func (x *Index) Dropped() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.dropped
}
