package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// recordCacheEntries bounds each decoded-record cache.
const recordCacheEntries = 8192

// recordCache memoizes decoded records (entry metadata, blob records) by
// their Badger key and version. Decoding the JSON records was the largest
// single cost of a small GET (about a fifth of its CPU). A record that is
// rewritten (access times flushed, deleted and stored again, quarantined)
// gets a new version, a commit timestamp, so a cached decode is only ever
// returned for the very bytes it was decoded from.
type recordCache[K comparable, V any] struct {
	// clone copies what a caller could change in a V (maps); nil when a V
	// holds nothing shared.
	clone func(V) V

	mu sync.Mutex
	m  map[K]cachedRecord[V]
}

type cachedRecord[V any] struct {
	version uint64
	val     V
}

// get returns the cached decode of k's record at version.
func (c *recordCache[K, V]) get(k K, version uint64) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || e.version != version {
		var zero V
		return zero, false
	}
	if c.clone != nil {
		return c.clone(e.val), true
	}
	return e.val, true
}

// put caches v, k's record at version; past the bound it drops an arbitrary
// entry first.
func (c *recordCache[K, V]) put(k K, version uint64, v V) {
	if c.clone != nil {
		v = c.clone(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]cachedRecord[V])
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= recordCacheEntries {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = cachedRecord[V]{version: version, val: v}
}

// cloneMeta copies a Meta's maps.
func cloneMeta(m Meta) Meta {
	m.Labels = copyMap(m.Labels)
	m.Components = copyMap(m.Components)
	return m
}

// readMetaCached is readMeta for read-only transactions (Get, Stat): it
// decodes each version of a record once.
func (s *Badger) readMetaCached(txn *badger.Txn, ref entryRef) (Meta, error) {
	item, err := txn.Get(metaKey(ref.ns, ref.key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Meta{}, ErrNotFound
	}
	if err != nil {
		return Meta{}, fmt.Errorf("read metadata of %s/%s: %w", ref.ns, ref.key, err)
	}
	if m, ok := s.metas.get(ref, item.Version()); ok {
		return m, nil
	}
	m, err := itemMeta(ref, item)
	if err != nil {
		return Meta{}, err
	}
	s.metas.put(ref, item.Version(), m)
	return m, nil
}

// readBlobCached reads and decodes the blob record item (of blob sha) in a
// read-only transaction, once per version.
func (s *Badger) readBlobCached(item *badger.Item, sha [32]byte) (blobRecord, error) {
	if b, ok := s.blobs.get(sha, item.Version()); ok {
		return b, nil
	}
	var blob blobRecord
	if err := item.Value(func(v []byte) error {
		var err error
		blob, err = decodeBlob(v)
		return err
	}); err != nil {
		return blobRecord{}, err
	}
	s.blobs.put(sha, item.Version(), blob)
	return blob, nil
}
