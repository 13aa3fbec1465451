package store

import (
	"sync"
	"sync/atomic"
)

// hotMetaEntries bounds the hot metadata cache. It holds only entries whose
// blob was in the hot cache when they were read, so 16384 covers a full
// 64 MiB hot cache of 4 KiB blobs; an entry costs a Meta (a few hundred
// bytes with its strings), so the bound is a few MiB.
const hotMetaEntries = 16384

// hotMetas keeps the current metadata of entries whose blob is in the hot
// cache, so that a GET of a hot small entry opens no Badger transaction at
// all (the read transaction's timestamp bookkeeping and the skiplist lookup
// of the metadata key were about a fifth of such a GET's server CPU).
//
// It is exact because the store is the only writer of its Badger: every
// commit that writes or deletes an entry's metadata key (Put, Delete,
// eviction and expiry, quarantine, restore, the access-time flush) calls
// forget after it commits and before it returns, so once a change is
// visible in Badger it is visible here. A reader that read Badger
// before such a commit must not put what it read after the forget: put
// only stores when no forget ran since the reader's begin, which it takes
// before opening its transaction. The last access time and hit count are
// not served from here: they come from the in-memory accounting on every
// Get (access), as before.
//
// Bounded by hotMetaEntries; past the bound a put drops an arbitrary entry
// first (the next GET of that entry reads Badger again).
type hotMetas struct {
	// gen counts forgets; a put carries the gen its reader began at.
	gen atomic.Uint64
	mu  sync.Mutex
	m   map[entryRef]Meta
}

// begin returns the generation a reader passes to put: take it before
// opening the read transaction whose metadata it will put.
func (c *hotMetas) begin() uint64 { return c.gen.Load() }

// get returns ref's cached metadata (its maps copied: callers may change
// them).
func (c *hotMetas) get(ref entryRef) (Meta, bool) {
	c.mu.Lock()
	m, ok := c.m[ref]
	c.mu.Unlock()
	if !ok {
		return Meta{}, false
	}
	return cloneMeta(m), true
}

// put caches m, ref's metadata as read by a reader that began at gen,
// unless a forget ran since.
func (c *hotMetas) put(ref entryRef, m Meta, gen uint64) {
	m = cloneMeta(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if c.m == nil {
		c.m = make(map[entryRef]Meta)
	}
	if _, ok := c.m[ref]; !ok && len(c.m) >= hotMetaEntries {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[ref] = m
}

// forget drops refs' metadata; call it after every commit that changed
// their metadata records, before the change is reported done.
func (c *hotMetas) forget(refs ...entryRef) {
	c.mu.Lock()
	c.gen.Add(1)
	for _, ref := range refs {
		delete(c.m, ref)
	}
	c.mu.Unlock()
}

// len returns the number of entries cached.
func (c *hotMetas) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
