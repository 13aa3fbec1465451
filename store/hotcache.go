package store

import (
	"bytes"
	"container/list"
	"errors"
	"io"
	"sync"
)

// DefaultHotCacheBytes is the default Config.HotCacheBytes.
const DefaultHotCacheBytes = 64 << 20

// hotEntryMax is the largest blob the hot cache holds: small entries are the
// ones whose GET cost is per request (Badger lookups, checksum, copies), not
// per byte.
const hotEntryMax = 64 << 10

// hotCache keeps the verified bytes of small, recently read blobs in memory,
// keyed by SHA-256, so that a GET of a hot small entry skips the blob
// record, the chunk read and its checksum; its metadata comes from hotMetas
// (hotmeta.go), which every change to the entry updates at once, or else
// from Badger. A blob's bytes never change for its SHA-256 (Put verifies
// the digest of what it stores), so a cached blob cannot be stale: at worst
// it outlives its last entry until LRU order drops it, and freeing a blob
// drops it at once. Bounded by max bytes in all (each blob at most
// hotEntryMax); the slices are never written after insertion, so readers
// share them without copying.
type hotCache struct {
	mu   sync.Mutex
	max  int64
	used int64
	m    map[[32]byte]*list.Element
	lru  list.List // of *hotBlob, most recently used first
	// ticks counts gets and insertions; a blob moved to the front fewer than a quarter of
	// the cache's blobs ago is still in the front quarter and stays put.
	// Moving every hit (pointer chasing through the list) was a third of
	// a hot GET's cost in the store; the order is LRU but for that
	// quarter.
	ticks uint64
}

type hotBlob struct {
	sha  [32]byte
	data []byte
	// moved is the tick at which the blob was last moved to the front.
	moved uint64
}

// get returns the cached bytes of sha; the caller must not modify them.
func (c *hotCache) get(sha [32]byte) ([]byte, bool) {
	if c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[sha]
	if !ok {
		return nil, false
	}
	b := e.Value.(*hotBlob)
	c.ticks++
	if c.ticks-b.moved > uint64(len(c.m)/4) {
		c.lru.MoveToFront(e)
		b.moved = c.ticks
	}
	return b.data, true
}

// put caches a copy of data, the verified bytes of blob sha, evicting the
// least recently used blobs past the bound.
func (c *hotCache) put(sha [32]byte, data []byte) {
	if c.max <= 0 || int64(len(data)) > hotEntryMax || int64(len(data)) > c.max {
		return
	}
	cp := bytes.Clone(data)
	if cp == nil {
		cp = []byte{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[sha]; ok {
		return
	}
	if c.m == nil {
		c.m = make(map[[32]byte]*list.Element)
	}
	c.ticks++ // an insertion moves the others back too
	c.m[sha] = c.lru.PushFront(&hotBlob{sha: sha, data: cp, moved: c.ticks})
	c.used += int64(len(cp))
	for c.used > c.max {
		c.removeLocked(c.lru.Back())
	}
}

// drop forgets blob sha (freed or quarantined).
func (c *hotCache) drop(sha [32]byte) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[sha]; ok {
		c.removeLocked(e)
	}
}

func (c *hotCache) removeLocked(e *list.Element) {
	b := c.lru.Remove(e).(*hotBlob)
	delete(c.m, b.sha)
	c.used -= int64(len(b.data))
}

// stats returns the blobs and bytes cached.
func (c *hotCache) stats() (blobs int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.used
}

// hotReader reads a range of a cached blob. Bytes lets the HTTP layer send
// the range without copying it (the slice is shared and read-only).
type hotReader struct {
	bytes.Reader
	data   []byte
	closed bool
}

func newHotReader(data []byte) *hotReader {
	r := &hotReader{data: data}
	r.Reset(data)
	return r
}

// Bytes returns the unread rest of the range, which the caller must not
// modify.
func (r *hotReader) Bytes() []byte { return r.data[len(r.data)-r.Len():] }

// Read implements io.Reader.
func (r *hotReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, errors.New("read entry: reader is closed")
	}
	return r.Reader.Read(p)
}

// WriteTo implements io.WriterTo.
func (r *hotReader) WriteTo(w io.Writer) (int64, error) {
	if r.closed {
		return 0, errors.New("read entry: reader is closed")
	}
	return r.Reader.WriteTo(w)
}

// Close implements io.Closer.
func (r *hotReader) Close() error {
	r.closed = true
	return nil
}
