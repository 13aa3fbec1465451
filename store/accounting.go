package store

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// entryRef names one entry.
type entryRef struct {
	ns  string
	key Key
}

// acctEntry is a copy of one live entry's accounting, as the LRU tails and
// tests read it.
type acctEntry struct {
	ref   entryRef
	blob  [32]byte
	atime time.Time
}

// acctBlob is the accounting of a blob that is not inline in its one entry's
// slot (slab.go): shared by several entries, referenced by a quarantined
// entry, pinned, unused but pinned, or too large for a slot's size field.
type acctBlob struct {
	size int64
	refs int
	// pins counts uploads about to reference the blob; a pinned blob is not
	// freed when its last entry goes.
	pins int
}

// accessUpdate is a batched access (last access time and new hits) waiting to
// be written to an entry's metadata.
type accessUpdate struct {
	ref   entryRef
	atime time.Time
	hits  int64
}

// accounting is the store's size, LRU and access bookkeeping. It does no I/O
// and is not safe for concurrent use: one lock owns it.
//
// Bytes counts unique blobs once, however many entries share them; reserved
// counts bytes promised to uploads in flight. Each namespace's LRU list
// orders its entries by last access, most recent at the front; the global
// least recently used entry is the oldest of the lists' tails.
//
// Entries live in a slab of fixed-size slots (slab.go) indexed by byKey
// ((namespace id, key) to slot) and, for blobs inline in their one entry's
// slot, by byBlob (digest to slot); every other blob is in shared. So an
// entry costs about 100 bytes of heap, and the maps hold only the few
// shared blobs, the entries accessed since the last flush and the held
// entries.
type accounting struct {
	max      int64 // 0 means unlimited
	bytes    int64
	reserved int64
	slots    slab
	byKey    slotTable
	byBlob   slotTable
	live     int // live entries
	// shared holds the blobs not inline in a slot (see acctBlob); its
	// entries' slots carry slotShared.
	shared map[[32]byte]*acctBlob
	// dirty holds the pending hits of the entries accessed since their
	// last flush, by slot: bounded by the live entries, and in practice by
	// those accessed in one Config.FlushInterval.
	dirty map[uint32]int64
	// ns holds each namespace's usage, quota and LRU list (nsacct.go);
	// every entry is on its namespace's list, none on a global one.
	ns map[string]*nsAcct
	// nsByID maps the namespace ids in slots to records; ids of forgotten
	// records (which have no entries) are reused from nsFree.
	nsByID []*nsAcct
	nsFree []uint32
	// nsList holds the same records, and tails[i] the last access
	// (UnixNano; math.MaxInt64 when empty) of nsList[i]'s LRU tail, so
	// that finding the store's oldest entry is a scan of one contiguous
	// slice (nsacct.go).
	nsList []*nsAcct
	tails  []int64
	quotas Quotas
	// sweepAt is the number of namespace records past which forgettable
	// ones are swept (nsacct.go).
	sweepAt int
	// held are the quarantined entries that keep their blob (quarantine.go):
	// each holds a reference to it (in shared), so its bytes count, but
	// none is in the LRU list or served.
	held map[entryRef]heldEntry

	// evictions counts every entry the store removed on its own: for
	// room (size, quota) or by expiry (idle, age).
	evictions         int64
	integrityFailures int64
	// quarantines counts reported and admin quarantines by cause.
	quarantines [numCauses]int64
}

// loadedEntry is an entry as found on disk when the store opens.
type loadedEntry struct {
	ref   entryRef
	blob  [32]byte
	size  int64
	atime time.Time
}

func newAccounting(max int64) *accounting {
	return &accounting{
		max:     max,
		slots:   newSlab(),
		shared:  make(map[[32]byte]*acctBlob),
		dirty:   make(map[uint32]int64),
		held:    make(map[entryRef]heldEntry),
		ns:      make(map[string]*nsAcct),
		sweepAt: maxNamespaceRecords,
	}
}

// keyHashOf and blobHashOf recompute a slot's hashes when a table moves it.
func (a *accounting) keyHashOf(s uint32) uint64 {
	e := a.slots.at(s)
	return a.slots.entryHash(e.nsID(), &e.key)
}

func (a *accounting) blobHashOf(s uint32) uint64 {
	return a.slots.blobHash(&a.slots.at(s).blob)
}

// find returns ref's slot and its cell in byKey.
func (a *accounting) find(ref entryRef) (slot uint32, cell int, ok bool) {
	n, ok := a.ns[ref.ns]
	if !ok {
		return 0, 0, false
	}
	id := n.id
	cell, slot, ok = a.byKey.find(a.slots.entryHash(id, &ref.key), func(s uint32) bool {
		e := a.slots.at(s)
		return e.key == ref.key && e.nsID() == id
	})
	return slot, cell, ok
}

// findBlob returns the slot whose inline blob is sha, and its cell in byBlob.
func (a *accounting) findBlob(sha *[32]byte) (slot uint32, cell int, ok bool) {
	cell, slot, ok = a.byBlob.find(a.slots.blobHash(sha), func(s uint32) bool { return a.slots.at(s).blob == *sha })
	return slot, cell, ok
}

// share moves the inline blob of slot s (at cell of byBlob) to shared, with
// the slot's one reference, and returns its record.
func (a *accounting) share(s uint32, cell int) *acctBlob {
	e := a.slots.at(s)
	b := &acctBlob{size: int64(e.size), refs: 1}
	a.shared[e.blob] = b
	a.byBlob.deleteAt(cell, a.blobHashOf)
	e.ns |= slotShared
	e.size = 0
	return b
}

// sharedBlob returns sha's record, moving it to shared if it is inline;
// nil when no such blob is stored.
func (a *accounting) sharedBlob(sha [32]byte) *acctBlob {
	if b, ok := a.shared[sha]; ok {
		return b
	}
	if s, cell, ok := a.findBlob(&sha); ok {
		return a.share(s, cell)
	}
	return nil
}

// has reports whether ref is a live entry.
func (a *accounting) has(ref entryRef) bool {
	_, _, ok := a.find(ref)
	return ok
}

// entry returns a copy of ref's accounting.
func (a *accounting) entry(ref entryRef) (acctEntry, bool) {
	s, _, ok := a.find(ref)
	if !ok {
		return acctEntry{}, false
	}
	e := a.slots.at(s)
	return acctEntry{ref: ref, blob: e.blob, atime: fromNano(e.atime)}, true
}

// refOf returns the entry in slot s.
func (a *accounting) refOf(s uint32) entryRef {
	e := a.slots.at(s)
	return entryRef{ns: a.nsByID[e.nsID()].name, key: e.key}
}

// sizeOf returns the size of slot s's blob.
func (a *accounting) sizeOf(e *entrySlot) int64 {
	if e.ns&slotShared == 0 {
		return int64(e.size)
	}
	if b := a.shared[e.blob]; b != nil {
		return b.size
	}
	return 0
}

// load adds entries found on disk, ordering the LRU list by their last access.
func (a *accounting) load(es []loadedEntry) {
	// Sort 16-byte (time, index) pairs, not the entries: ties keep the
	// scan's order, as a stable sort of the entries would.
	order := make([]loadOrder, len(es))
	for i, e := range es {
		order[i] = loadOrder{toNano(e.atime), int32(i)}
	}
	slices.SortFunc(order, func(x, y loadOrder) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.i, y.i)) })
	a.byKey.reserve(a.live+len(es), a.keyHashOf)
	a.byBlob.reserve(a.byBlob.n+len(es), a.blobHashOf)
	for _, o := range order {
		e := &es[o.i]
		a.add(e.ref, e.blob, e.size, e.atime)
	}
}

// loadOrder is an entry's place in load's sort.
type loadOrder struct {
	at int64
	i  int32
}

// add records a new entry as the most recently used and reports whether its
// blob is new. An entry already present is replaced.
func (a *accounting) add(ref entryRef, blob [32]byte, size int64, atime time.Time) (newBlob bool) {
	if a.has(ref) {
		a.remove(ref)
	}
	flags, inline := uint32(slotShared), uint32(0)
	if b := a.sharedBlob(blob); b != nil {
		b.refs++
	} else {
		a.bytes += size
		newBlob = true
		if size >= 0 && size <= math.MaxUint32 {
			flags, inline = 0, uint32(size)
		} else {
			a.shared[blob] = &acctBlob{size: size, refs: 1}
		}
	}
	s := a.link(ref, blob, atime, flags, inline)
	if flags&slotShared == 0 {
		a.byBlob.insert(a.slots.blobHash(&blob), s, a.blobHashOf)
	}
	return newBlob
}

// link puts a new entry at the front of its namespace's LRU list and in
// the live entries, and returns its slot; flags says where its blob is
// (its reference is the caller's), inline is its size when not shared, and
// the caller indexes an inline blob.
func (a *accounting) link(ref entryRef, blob [32]byte, atime time.Time, flags, inline uint32) uint32 {
	n := a.nsOf(ref.ns)
	s := a.slots.alloc()
	e := a.slots.at(s)
	e.key, e.blob, e.atime = ref.key, blob, toNano(atime)
	e.ns = n.id<<slotFlags | slotLive | flags
	e.size = inline
	a.slots.pushFront(n, s)
	n.bytes += a.sizeOf(e)
	if n.count == 1 {
		a.tailMoved(n)
	}
	a.byKey.insert(a.slots.entryHash(n.id, &ref.key), s, a.keyHashOf)
	a.live++
	return s
}

// unlink takes slot s (at cell of byKey) off its namespace's LRU list and
// out of the live entries, and frees it; its blob reference is the caller's
// (an inline blob must already be out of byBlob).
func (a *accounting) unlink(s uint32, cell int, size int64) {
	e := a.slots.at(s)
	n := a.nsByID[e.nsID()]
	wasTail := n.tailSlot == s
	a.slots.unlinkList(n, s)
	n.bytes -= size
	a.byKey.deleteAt(cell, a.keyHashOf)
	delete(a.dirty, s)
	a.slots.release(s)
	a.live--
	if wasTail {
		a.tailMoved(n)
	}
}

// remove forgets an entry. It reports the entry's blob and whether that blob
// lost its last reference (and so its bytes no longer count).
func (a *accounting) remove(ref entryRef) (blob [32]byte, freed, ok bool) {
	s, cell, ok := a.find(ref)
	if !ok {
		return blob, false, false
	}
	e := a.slots.at(s)
	blob = e.blob
	if e.ns&slotShared == 0 {
		size := int64(e.size)
		_, bcell, _ := a.findBlob(&blob)
		a.byBlob.deleteAt(bcell, a.blobHashOf)
		a.unlink(s, cell, size)
		a.bytes -= size
		return blob, true, true
	}
	b := a.shared[blob]
	if b == nil {
		a.unlink(s, cell, 0)
		return blob, false, true
	}
	a.unlink(s, cell, b.size)
	b.refs--
	if b.refs <= 0 && b.pins <= 0 {
		delete(a.shared, blob)
		a.bytes -= b.size
		freed = true
	}
	return blob, freed, true
}

// pin keeps a stored blob from being freed until unpin. It returns the
// token to unpin with, or nil when no such blob is stored.
func (a *accounting) pin(sha [32]byte) *acctBlob {
	b := a.sharedBlob(sha)
	if b != nil {
		b.pins++
	}
	return b
}

// unpin undoes pin and reports whether the blob is now unused and was
// forgotten (its record and chunks must then be deleted). A blob dropped
// meanwhile (quarantined) is left alone, even if stored again since.
func (a *accounting) unpin(sha [32]byte, token *acctBlob) (free bool) {
	b, ok := a.shared[sha]
	if !ok || b != token {
		return false
	}
	b.pins--
	if b.pins <= 0 && b.refs <= 0 {
		delete(a.shared, sha)
		a.bytes -= b.size
		return true
	}
	return false
}

// dropBlob forgets a blob that no entry uses any more, pinned or not.
func (a *accounting) dropBlob(sha [32]byte) {
	if b, ok := a.shared[sha]; ok && b.refs <= 0 {
		delete(a.shared, sha)
		a.bytes -= b.size
	}
}

// lookup returns the entry's blob and whether removing the entry would free
// that blob (its last reference, and not pinned).
func (a *accounting) lookup(ref entryRef) (blob [32]byte, lastRef, ok bool) {
	s, _, ok := a.find(ref)
	if !ok {
		return blob, false, false
	}
	e := a.slots.at(s)
	if e.ns&slotShared == 0 {
		return e.blob, true, true
	}
	b := a.shared[e.blob]
	return e.blob, b != nil && b.refs == 1 && b.pins == 0, true
}

// hasBlob reports whether a blob with this digest is stored.
func (a *accounting) hasBlob(sha [32]byte) bool {
	if _, ok := a.shared[sha]; ok {
		return true
	}
	_, _, ok := a.findBlob(&sha)
	return ok
}

// blobRefs returns a stored blob's references and pins (inline: one and
// none).
func (a *accounting) blobRefs(sha [32]byte) (refs, pins int, ok bool) {
	if b, ok := a.shared[sha]; ok {
		return b.refs, b.pins, true
	}
	if _, _, ok := a.findBlob(&sha); ok {
		return 1, 0, true
	}
	return 0, 0, false
}

// refsTo returns every entry that uses the blob.
func (a *accounting) refsTo(sha [32]byte) []entryRef {
	if s, _, ok := a.findBlob(&sha); ok {
		return []entryRef{a.refOf(s)}
	}
	if _, ok := a.shared[sha]; !ok {
		return nil
	}
	var refs []entryRef
	a.slots.each(func(s uint32, e *entrySlot) {
		if e.blob == sha {
			refs = append(refs, a.refOf(s))
		}
	})
	return refs
}

// touch records an access at t: the entry becomes the most recently used and
// gains a pending hit. It returns the entry's pending hits and false when the
// entry is unknown.
func (a *accounting) touch(ref entryRef, t time.Time) (pendingHits int64, ok bool) {
	s, _, ok := a.find(ref)
	if !ok {
		return 0, false
	}
	e := a.slots.at(s)
	if nt := toNano(t); nt > e.atime {
		e.atime = nt
	}
	pendingHits = a.dirty[s] + 1
	a.dirty[s] = pendingHits
	n := a.nsByID[e.nsID()]
	if n.head != s {
		wasTail := n.tailSlot == s
		a.slots.unlinkList(n, s)
		a.slots.pushFront(n, s)
		if wasTail {
			a.tailMoved(n)
		}
	} else if n.tailSlot == s {
		a.tailMoved(n) // the only entry: its tail time moved
	}
	return pendingHits, true
}

// access returns the in-memory last access time and pending hits of an entry.
func (a *accounting) access(ref entryRef) (atime time.Time, pendingHits int64, ok bool) {
	s, _, ok := a.find(ref)
	if !ok {
		return time.Time{}, 0, false
	}
	return fromNano(a.slots.at(s).atime), a.dirty[s], true
}

// dirtyAccesses returns the accesses not yet written, without clearing them;
// call flushed once they are stored.
func (a *accounting) dirtyAccesses() []accessUpdate {
	ups := make([]accessUpdate, 0, len(a.dirty))
	for s, hits := range a.dirty {
		ups = append(ups, accessUpdate{ref: a.refOf(s), atime: fromNano(a.slots.at(s).atime), hits: hits})
	}
	return ups
}

// flushed marks an update as stored: its hits no longer pend.
func (a *accounting) flushed(u accessUpdate) {
	s, _, ok := a.find(u.ref)
	if !ok {
		return
	}
	hits, dirty := a.dirty[s]
	if !dirty {
		return
	}
	hits -= u.hits
	if hits <= 0 && a.slots.at(s).atime <= toNano(u.atime) {
		delete(a.dirty, s)
		return
	}
	a.dirty[s] = hits
}

// oldest returns the least recently used entry: the oldest of the
// namespaces' LRU tails, a scan of the tails' access times (O(namespaces),
// about a nanosecond each).
func (a *accounting) oldest() (entryRef, bool) {
	best := -1
	for i, t := range a.tails {
		if t != emptyTail && (best < 0 || t < a.tails[best]) {
			best = i
		}
	}
	if best < 0 {
		return entryRef{}, false
	}
	return a.refOf(a.nsList[best].tailSlot), true
}

// fits reports whether n more bytes fit now, counting reservations.
func (a *accounting) fits(n int64) bool {
	return a.max <= 0 || a.bytes+a.reserved+n <= a.max
}

// possible reports whether n more bytes could fit after evicting every entry.
func (a *accounting) possible(n int64) bool {
	return a.max <= 0 || a.reserved+n <= a.max
}

// reserve promises n bytes to an upload in flight; release returns them.
func (a *accounting) reserve(n int64) { a.reserved += n }

// release returns n reserved bytes.
func (a *accounting) release(n int64) {
	a.reserved -= n
	if a.reserved < 0 {
		a.reserved = 0
	}
}

// usage returns a snapshot of sizes and counters.
func (a *accounting) usage() Usage {
	return Usage{
		Entries:           int64(a.live),
		Blobs:             int64(a.byBlob.n + len(a.shared)),
		Bytes:             a.bytes,
		MaxBytes:          a.max,
		Evictions:         a.evictions,
		IntegrityFailures: a.integrityFailures,
		Namespaces:        a.nsUsage(),

		Quarantined:         int64(len(a.held)),
		QuarantinesReported: a.quarantines[causeReports],
		QuarantinesAdmin:    a.quarantines[causeAdmin],
	}
}
