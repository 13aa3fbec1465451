package store

import (
	"container/list"
	"sort"
	"time"
)

// entryRef names one entry.
type entryRef struct {
	ns  string
	key Key
}

// acctEntry is the accounting view of one entry.
type acctEntry struct {
	ref   entryRef
	blob  [32]byte
	atime time.Time
	// pendingHits counts accesses not yet written to the metadata; dirty is
	// true while atime or pendingHits differ from what is stored.
	pendingHits int64
	dirty       bool
	elem        *list.Element
}

// acctBlob is the accounting view of one unique blob.
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
type accounting struct {
	max      int64 // 0 means unlimited
	bytes    int64
	reserved int64
	entries  map[entryRef]*acctEntry
	blobs    map[[32]byte]*acctBlob
	// ns holds each namespace's usage, quota and LRU list (nsacct.go);
	// every entry is on its namespace's list, none on a global one.
	ns     map[string]*nsAcct
	quotas Quotas
	// sweepAt is the number of namespace records past which forgettable
	// ones are swept (nsacct.go).
	sweepAt int

	// evictions counts every entry the store removed on its own: for
	// room (size, quota) or by expiry (idle, age).
	evictions         int64
	integrityFailures int64
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
		entries: make(map[entryRef]*acctEntry),
		blobs:   make(map[[32]byte]*acctBlob),
		ns:      make(map[string]*nsAcct),
		sweepAt: maxNamespaceRecords,
	}
}

// load adds entries found on disk, ordering the LRU list by their last access.
func (a *accounting) load(es []loadedEntry) {
	sort.SliceStable(es, func(i, j int) bool { return es[i].atime.Before(es[j].atime) })
	for _, e := range es {
		a.add(e.ref, e.blob, e.size, e.atime)
	}
}

// add records a new entry as the most recently used and reports whether its
// blob is new. An entry already present is replaced.
func (a *accounting) add(ref entryRef, blob [32]byte, size int64, atime time.Time) (newBlob bool) {
	if _, ok := a.entries[ref]; ok {
		a.remove(ref)
	}
	b, ok := a.blobs[blob]
	if !ok {
		b = &acctBlob{size: size}
		a.blobs[blob] = b
		a.bytes += size
		newBlob = true
	}
	b.refs++
	e := &acctEntry{ref: ref, blob: blob, atime: atime}
	n := a.nsOf(ref.ns)
	e.elem = n.lru.PushFront(e)
	n.bytes += b.size
	a.entries[ref] = e
	return newBlob
}

// remove forgets an entry. It reports the entry's blob and whether that blob
// lost its last reference (and so its bytes no longer count).
func (a *accounting) remove(ref entryRef) (blob [32]byte, freed, ok bool) {
	e, ok := a.entries[ref]
	if !ok {
		return blob, false, false
	}
	b := a.blobs[e.blob]
	n := a.ns[ref.ns]
	n.lru.Remove(e.elem)
	n.bytes -= b.size
	delete(a.entries, ref)
	b.refs--
	if b.refs <= 0 && b.pins <= 0 {
		delete(a.blobs, e.blob)
		a.bytes -= b.size
		freed = true
	}
	return e.blob, freed, true
}

// pin keeps a stored blob from being freed until unpin. It returns the
// token to unpin with, or nil when no such blob is stored.
func (a *accounting) pin(sha [32]byte) *acctBlob {
	b, ok := a.blobs[sha]
	if !ok {
		return nil
	}
	b.pins++
	return b
}

// unpin undoes pin and reports whether the blob is now unused and was
// forgotten (its record and chunks must then be deleted). A blob dropped
// meanwhile (quarantined) is left alone, even if stored again since.
func (a *accounting) unpin(sha [32]byte, token *acctBlob) (free bool) {
	b, ok := a.blobs[sha]
	if !ok || b != token {
		return false
	}
	b.pins--
	if b.pins <= 0 && b.refs <= 0 {
		delete(a.blobs, sha)
		a.bytes -= b.size
		return true
	}
	return false
}

// dropBlob forgets a blob that no entry uses any more, pinned or not.
func (a *accounting) dropBlob(sha [32]byte) {
	if b, ok := a.blobs[sha]; ok && b.refs <= 0 {
		delete(a.blobs, sha)
		a.bytes -= b.size
	}
}

// lookup returns the entry's blob and whether removing the entry would free
// that blob (its last reference, and not pinned).
func (a *accounting) lookup(ref entryRef) (blob [32]byte, lastRef, ok bool) {
	e, ok := a.entries[ref]
	if !ok {
		return blob, false, false
	}
	b := a.blobs[e.blob]
	return e.blob, b.refs == 1 && b.pins == 0, true
}

// hasBlob reports whether a blob with this digest is stored.
func (a *accounting) hasBlob(sha [32]byte) bool {
	_, ok := a.blobs[sha]
	return ok
}

// refsTo returns every entry that uses the blob.
func (a *accounting) refsTo(sha [32]byte) []entryRef {
	var refs []entryRef
	for ref, e := range a.entries {
		if e.blob == sha {
			refs = append(refs, ref)
		}
	}
	return refs
}

// touch records an access at t: the entry becomes the most recently used and
// gains a pending hit. It returns the entry's pending hits and false when the
// entry is unknown.
func (a *accounting) touch(ref entryRef, t time.Time) (pendingHits int64, ok bool) {
	e, ok := a.entries[ref]
	if !ok {
		return 0, false
	}
	if t.After(e.atime) {
		e.atime = t
	}
	e.pendingHits++
	e.dirty = true
	a.ns[ref.ns].lru.MoveToFront(e.elem)
	return e.pendingHits, true
}

// access returns the in-memory last access time and pending hits of an entry.
func (a *accounting) access(ref entryRef) (atime time.Time, pendingHits int64, ok bool) {
	e, ok := a.entries[ref]
	if !ok {
		return time.Time{}, 0, false
	}
	return e.atime, e.pendingHits, true
}

// dirtyAccesses returns the accesses not yet written, without clearing them;
// call flushed once they are stored.
func (a *accounting) dirtyAccesses() []accessUpdate {
	var ups []accessUpdate
	for ref, e := range a.entries {
		if e.dirty {
			ups = append(ups, accessUpdate{ref: ref, atime: e.atime, hits: e.pendingHits})
		}
	}
	return ups
}

// flushed marks an update as stored: its hits no longer pend.
func (a *accounting) flushed(u accessUpdate) {
	e, ok := a.entries[u.ref]
	if !ok {
		return
	}
	e.pendingHits -= u.hits
	if e.pendingHits <= 0 && !e.atime.After(u.atime) {
		e.pendingHits = 0
		e.dirty = false
	}
}

// oldest returns the least recently used entry: the oldest of the
// namespaces' LRU tails, O(namespaces).
func (a *accounting) oldest() (entryRef, bool) {
	var old *acctEntry
	for _, n := range a.ns {
		if e := n.tail(); e != nil && (old == nil || e.atime.Before(old.atime)) {
			old = e
		}
	}
	if old == nil {
		return entryRef{}, false
	}
	return old.ref, true
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
		Entries:           int64(len(a.entries)),
		Blobs:             int64(len(a.blobs)),
		Bytes:             a.bytes,
		MaxBytes:          a.max,
		Evictions:         a.evictions,
		IntegrityFailures: a.integrityFailures,
		Namespaces:        a.nsUsage(),
	}
}
