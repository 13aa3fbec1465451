package store

import (
	"hash/maphash"
	"math"
	"time"
)

// The accounting keeps its entries in a slab: fixed-size slots in pages of
// slabPage, addressed by a uint32 index, reused through a free list. A slot
// is 88 bytes (the key and blob digests are 64 of them); the LRU lists are
// threaded through the slots (prev, next), the namespace is a small id and
// a blob used by this entry alone keeps its size in the slot. Two
// slotTables index the slots by (namespace, key) and by blob digest, so an
// entry costs about 100 bytes where pointers, container/list elements and
// maps keyed by strings cost over 400.

// slabPage is the number of slots per page: pages are allocated whole, so a
// slab wastes less than one page (88 KiB), where one growing slice would
// copy itself and keep up to a quarter of its length unused.
const slabPage = 1024

// nilSlot ends an LRU list and the free list.
const nilSlot = math.MaxUint32

// Flags in entrySlot.ns, below the namespace id.
const (
	slotLive   = 1 << 0 // the slot holds an entry (else it is free)
	slotShared = 1 << 1 // the entry's blob is in accounting.shared, not inline
	slotFlags  = 2
)

// entrySlot is one live entry (or a free slot).
type entrySlot struct {
	key  Key
	blob [32]byte
	// atime is the last access in UnixNano; zeroTime for the zero time.
	atime      int64
	prev, next uint32
	// size is the blob's size when the blob is inline (not slotShared).
	size uint32
	// ns is the namespace id << slotFlags | flags.
	ns uint32
}

// zeroTime stands for time.Time{} in entrySlot.atime (whose UnixNano is
// undefined).
const zeroTime = math.MinInt64

func toNano(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nsID returns the slot's namespace id.
func (e *entrySlot) nsID() uint32 { return e.ns >> slotFlags }

// slab is the accounting's entry storage.
type slab struct {
	pages [][]entrySlot
	used  uint32 // slots ever handed out (the rest of the last page is unused)
	free  uint32 // head of the free list, threaded through next
	seed  maphash.Seed
}

func newSlab() slab { return slab{free: nilSlot, seed: maphash.MakeSeed()} }

// at returns slot s.
func (sl *slab) at(s uint32) *entrySlot { return &sl.pages[s/slabPage][s%slabPage] }

// alloc returns a free slot, growing the slab by a page when none is.
func (sl *slab) alloc() uint32 {
	if s := sl.free; s != nilSlot {
		sl.free = sl.at(s).next
		return s
	}
	if sl.used%slabPage == 0 {
		sl.pages = append(sl.pages, make([]entrySlot, slabPage))
	}
	sl.used++
	return sl.used - 1
}

// release puts slot s on the free list.
func (sl *slab) release(s uint32) {
	*sl.at(s) = entrySlot{next: sl.free}
	sl.free = s
}

// entryHash is the hash of (namespace id, key) in the entry index. The seed
// is random, so clients choosing keys cannot aim them at one probe run.
func (sl *slab) entryHash(ns uint32, key *Key) uint64 {
	h := maphash.Bytes(sl.seed, key[:])
	return h ^ (uint64(ns)+1)*0x9E3779B97F4A7C15
}

// blobHash is the hash of a blob digest in the blob index.
func (sl *slab) blobHash(sha *[32]byte) uint64 {
	return maphash.Bytes(sl.seed, sha[:]) * 0xC2B2AE3D27D4EB4F
}

// each calls f for every live slot.
func (sl *slab) each(f func(s uint32, e *entrySlot)) {
	for s := uint32(0); s < sl.used; s++ {
		if e := sl.at(s); e.ns&slotLive != 0 {
			f(s, e)
		}
	}
}

// pushFront puts slot s at the front (most recently used end) of namespace
// n's list, which runs from n.head to n.tailSlot through next.
func (sl *slab) pushFront(n *nsAcct, s uint32) {
	e := sl.at(s)
	e.prev, e.next = nilSlot, n.head
	if n.head != nilSlot {
		sl.at(n.head).prev = s
	} else {
		n.tailSlot = s
	}
	n.head = s
	n.count++
}

// unlinkList takes slot s off namespace n's list.
func (sl *slab) unlinkList(n *nsAcct, s uint32) {
	e := sl.at(s)
	if e.prev != nilSlot {
		sl.at(e.prev).next = e.next
	} else {
		n.head = e.next
	}
	if e.next != nilSlot {
		sl.at(e.next).prev = e.prev
	} else {
		n.tailSlot = e.prev
	}
	e.prev, e.next = nilSlot, nilSlot
	n.count--
}
