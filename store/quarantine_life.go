package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// How a quarantined entry that kept its blob (quarantine.go) ends: an admin
// Delete, a Put of different bytes under its key (the writer recompiled),
// eviction once no live entry is left to evict, or a corrupt chunk of its
// blob; and how it is found again when the store opens.

// deleteHeldLocked deletes a held entry's records (and its blob's, when it
// was the last reference) and returns the purge of the blob's chunks, to
// call after releasing wmu (which the caller holds). ErrNotFound when ref
// is not held.
func (s *Badger) deleteHeldLocked(ref entryRef) (purge func(), err error) {
	nop := func() {}
	h, lastRef, ok := s.heldBlob(ref)
	if !ok {
		return nop, ErrNotFound
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	blob, err := s.dropHeldRecords(txn, ref, h.blob, lastRef)
	if err != nil {
		return nop, err
	}
	if err := txn.Commit(); err != nil {
		return nop, fmt.Errorf("delete quarantined entry %s/%s: %w", ref.ns, ref.key, err)
	}
	s.mu.Lock()
	s.acct.dropHeld(ref)
	s.mu.Unlock()
	return s.chunkPurge(blob), nil
}

// heldBlob returns ref's held entry and whether dropping it would free its
// blob (the last reference, not pinned); ok is false when ref is not held.
func (s *Badger) heldBlob(ref entryRef) (h heldEntry, lastRef, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok = s.acct.held[ref]
	if refs, pins, stored := s.acct.blobRefs(h.blob); ok && stored {
		lastRef = refs == 1 && pins == 0
	}
	return h, lastRef, ok
}

// dropHeldRecords deletes ref's quarantine and reports records in txn and,
// when lastRef, the record of its blob sha, which it returns (zero if not
// deleted).
func (s *Badger) dropHeldRecords(txn *badger.Txn, ref entryRef, sha [32]byte, lastRef bool) (blobRecord, error) {
	var blob blobRecord
	if err := txn.Delete(quarantineKey(ref.ns, ref.key)); err != nil {
		return blob, fmt.Errorf("delete quarantined entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if err := txn.Delete(reportKey(ref.ns, ref.key)); err != nil {
		return blob, fmt.Errorf("delete quarantined entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if !lastRef {
		return blob, nil
	}
	item, err := txn.Get(blobKey(sha))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return blob, nil
	}
	if err == nil {
		err = item.Value(func(v []byte) error {
			blob, err = decodeBlob(v)
			return err
		})
	}
	if err != nil {
		return blob, fmt.Errorf("delete quarantined entry %s/%s: read blob: %w", ref.ns, ref.key, err)
	}
	if err := txn.Delete(blobKey(sha)); err != nil {
		return blob, fmt.Errorf("delete quarantined entry %s/%s: %w", ref.ns, ref.key, err)
	}
	s.hot.drop(sha) // hotcache.go
	return blob, nil
}

// chunkPurge returns the purge of a deleted blob's chunks (a no-op for the
// zero record).
func (s *Badger) chunkPurge(blob blobRecord) func() {
	u, err := blob.uploadID()
	if blob.ChunkSize == 0 || err != nil {
		return func() {}
	}
	n, size := blob.chunks(), blob.Size
	return func() { s.purgeChunks(u, n, size) }
}

// replaceHeldLocked is a Put's commit meeting a quarantined entry under its
// key (txn is the commit's, wmu held): the same bytes are ErrQuarantined,
// so that a writer replaying its upload cannot resurrect what clients could
// not load; different bytes replace it (the writer recompiled): its records
// are deleted in txn and, after the commit, done must be called (it forgets
// the held entry and returns the purge of its blob's chunks, if freed).
func (s *Badger) replaceHeldLocked(txn *badger.Txn, ref entryRef, sha [32]byte) (done func() func(), err error) {
	h, lastRef, ok := s.heldBlob(ref)
	if !ok {
		// A corrupt-chunk quarantine's record (no bytes kept) ends when
		// the key is stored again: it must not list the new entry as
		// quarantined.
		if _, err := txn.Get(quarantineKey(ref.ns, ref.key)); err == nil {
			if err := txn.Delete(quarantineKey(ref.ns, ref.key)); err != nil {
				return nil, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
			}
		}
		return nil, nil
	}
	if h.blob == sha {
		return nil, fmt.Errorf("put entry %s/%s: these bytes were quarantined (clients reported that they cannot load them); store different bytes, or ask an admin to restore the entry: %w",
			ref.ns, ref.key, ErrQuarantined)
	}
	blob, err := s.dropHeldRecords(txn, ref, h.blob, lastRef)
	if err != nil {
		return nil, err
	}
	return func() func() {
		s.mu.Lock()
		s.acct.dropHeld(ref)
		s.mu.Unlock()
		s.log.Warn("quarantined entry replaced by new bytes", "namespace", ref.ns, "key", ref.key.String())
		return s.chunkPurge(blob)
	}, nil
}

// evictHeldLocked evicts the entry quarantined first, when no live entry is
// left to evict; ok is false when there is none either.
func (s *Badger) evictHeldLocked() (purge func(), ok bool, err error) {
	s.mu.Lock()
	ref, ok := s.acct.oldestHeld()
	s.mu.Unlock()
	if !ok {
		return func() {}, false, nil
	}
	purge, err = s.deleteHeldLocked(ref)
	if err != nil {
		return purge, true, fmt.Errorf("evict quarantined entry %s/%s: %w", ref.ns, ref.key, err)
	}
	s.log.Info("quarantined entry evicted", "namespace", ref.ns, "key", ref.key.String())
	return purge, true, nil
}

// forgetHeldBlob drops from the held set the entries whose blob a corrupt
// chunk just deleted: they stay listed, no longer restorable. The caller
// holds wmu.
func (s *Badger) forgetHeldBlob(sha [32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, h := range s.acct.held {
		if h.blob != sha {
			continue
		}
		// Keep the blob in the accounting: the caller deletes its record
		// and chunks because it is still there.
		delete(s.acct.held, ref)
		if b := s.acct.shared[sha]; b != nil { // a held entry's blob is shared
			b.refs--
		}
	}
}

// recoverHeld finds, at Open, the quarantined entries that kept their blob
// (found holds the blobs found) and marks those blobs used; quarantine
// records whose blob is gone stay, not restorable.
func (s *Badger) recoverHeld(txn *badger.Txn, found *foundBlobs) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixQuarantine), PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		ref, ok := parseEntryKey(item.Key())
		if !ok {
			continue
		}
		var q Quarantined
		var kept bool
		err := item.Value(func(v []byte) error {
			var err error
			q, err = decodeQuarantined(ref, v)
			kept = q.Cause != CauseCorrupt
			return err
		})
		if err != nil || !kept {
			continue
		}
		size, ok := found.use(q.Meta.SHA256)
		if !ok {
			continue
		}
		s.acct.loadHeld(ref, q.Meta.SHA256, size, q.QuarantinedAt)
	}
}
