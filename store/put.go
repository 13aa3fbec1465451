package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

// checkNamespace validates ns for operation op.
func checkNamespace(op, ns string) error {
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	}
	return nil
}

// checkLabels enforces a count limit and MaxLabelLen on a label-like map.
func checkLabels(what string, m map[string]string, maxCount int) error {
	if len(m) > maxCount {
		return fmt.Errorf("%w: %d %s, at most %d allowed", ErrInvalid, len(m), what, maxCount)
	}
	for k, v := range m {
		if len(k) > MaxLabelLen || len(v) > MaxLabelLen {
			return fmt.Errorf("%w: %s %q longer than %d bytes", ErrInvalid, what, k, MaxLabelLen)
		}
	}
	return nil
}

// Put streams r into the entry (ns, key) in checksummed chunks.
//
// The chunks are staged under a fresh upload id while SHA-256 is computed;
// the metadata (and, for a new blob, the blob record naming the upload) is
// committed last, in one transaction, under the store's write lock. So an
// entry is visible only once all its bytes are, two concurrent Puts of one key
// store it once (the loser sees the winner's entry and returns Created=false
// or ErrConflict), and a blob already stored under another key is shared
// (dedup) and the staged copy dropped.
//
// # Errors
//
//   - ErrInvalid: bad namespace, too many or too long labels or components.
//   - ErrTooLarge: opts.Size, or the bytes read, exceed Config.MaxEntryBytes.
//   - ErrFull: the bytes cannot fit under Config.MaxBytes even after evicting
//     every entry (checked up front for a declared size, and while streaming).
//   - ErrQuota (a *QuotaError): the entry cannot fit under its namespace's
//     Quota even after evicting every entry of the namespace, or uploads in
//     flight into the namespace hold the room. A Put into a namespace at its
//     quota evicts that namespace's least recently used entries, no other's.
//   - ErrSizeMismatch: opts.Size > 0 and the body has another length.
//   - ErrDigestMismatch: opts.SHA256 differs from the body's SHA-256.
//   - ErrConflict: the entry exists with different bytes; it is untouched.
//   - ErrDirUnavailable: the directory is gone or not writable (DirErr);
//     checked before the body is read, and before each write to Badger.
//   - ctx errors and r's errors, wrapped.
//
// On any error nothing is stored and staged chunks are deleted (or collected
// at the next Open if the process dies first). ctx is checked between chunks;
// a Read blocked on a stalled client is ended by closing the client's body.
//
// A Put of a key that already exists only reads and hashes the body: it
// stores nothing and evicts nothing, and returns Created=false or
// ErrConflict. A Put of a new key whose opts.SHA256 names content already
// stored also stores no bytes: it verifies the body and then shares the
// stored blob (its namespace's quota still counts the entry, and may evict
// the namespace's own entries for it).
func (s *Badger) Put(ctx context.Context, ns string, key Key, r io.Reader, opts PutOptions) (res PutResult, err error) {
	ref := entryRef{ns, key}
	if err := checkNamespace("put entry", ns); err != nil {
		return res, err
	}
	// Whatever a successful Put answers with (its new entry, or one another
	// Put stored and may not have synced yet) is on disk before it returns
	// (Config.SyncWrites). This runs after the other deferred calls, outside
	// the store's locks, so concurrent Puts share the fsync (groupsync.go).
	// expected: this Put announced its coming wait to the syncer
	// (expectSync, just before its commit); the wait consumes that.
	expected := false
	defer func() {
		if err == nil {
			if serr := s.syncWait(ctx, expected); serr != nil {
				res, err = PutResult{}, fmt.Errorf("put entry %s/%s: stored, but not yet durable (retry the upload to make sure it is): %w", ns, key, serr)
			}
		} else if expected {
			s.syncer.unexpect()
		}
	}()
	if err := checkLabels("labels", opts.Labels, MaxLabels); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	if err := checkLabels("components", opts.Components, MaxComponents); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	declared := opts.Size > 0
	if max := s.cfg.MaxEntryBytes; max > 0 && opts.Size > max {
		return res, fmt.Errorf("put entry %s/%s: declared size %d over the %d byte limit: %w", ns, key, opts.Size, max, ErrTooLarge)
	}
	if max := s.cfg.MaxBytes; max > 0 && opts.Size > max {
		return res, fmt.Errorf("put entry %s/%s: declared size %d over the store's %d bytes: %w", ns, key, opts.Size, max, ErrNeverFits)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	if s.mayExist(ref) {
		if existing, err := s.Stat(ctx, ns, key); err == nil {
			return s.verifyExisting(ctx, existing, r, opts)
		} else if !errors.Is(err, ErrNotFound) {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
	}
	// Refused before the body is read: storing it would hand Badger writes
	// it may not survive (dirhealth.go). A Put of an existing key (above)
	// writes nothing, so it goes on.
	if err := s.lookDir(); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w; nothing was stored, and what the server holds is still served: make the directory writable again and uploads resume, or restart the server on a directory it can write", ns, key, err)
	}
	if opts.SHA256 != nil {
		if token := s.pin(*opts.SHA256); token != nil {
			defer s.unpin(*opts.SHA256, token)
			return s.putKnownBlob(ctx, ref, r, opts, token.size)
		}
	}

	// held is what this upload's reservations hold (reserve.go): the
	// entry's slot in its namespace from the start; its bytes up front
	// when they are declared and fit without evicting anything, else
	// chunk by chunk as they arrive, evicting as they do, so that an
	// upload abandoned part-way (a preempted job, a dropped connection)
	// evicts no more than it sent. A declared size that could never fit
	// fails at once.
	var held claim
	defer func() { s.release(held) }()
	bytesHeld := false
	if declared {
		whole := claim{ns: ns, entry: true, bytes: opts.Size, nsBytes: opts.Size}
		ok, err := s.reserveIfFits(whole)
		if err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		if ok {
			held, bytesHeld = whole, true
		}
	}
	if !bytesHeld {
		first := claim{ns: ns, entry: true}
		if err := s.reserve(ctx, first); err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		held = first
	}

	u := newUploadID()
	w := &chunkWriter{s: s, u: u}
	keepChunks := false
	defer func() {
		werr := w.close()
		s.diskSettle(w.bytes) // before the reservation's release (diskbound.go)
		if !keepChunks {
			s.purgeChunks(u, w.n, w.written)
		} else if werr != nil {
			s.log.Error("chunk write failed after commit", "namespace", ns, "key", key.String(), "err", werr)
		}
	}()

	h := sha256.New()
	var total int64
	// inline is the only chunk of a blob that fits in one: it is committed
	// in the metadata's transaction instead of its own (one write, not two;
	// still all or nothing).
	var inline []byte
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		buf := w.buf()
		n, rerr := io.ReadFull(r, buf[4:])
		// A body that fails, or ends short of its declared size, fails the
		// upload before what it sent of this chunk is reserved (which may
		// evict) or written.
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return res, fmt.Errorf("put entry %s/%s: read body: %w", ns, key, rerr)
		}
		if declared && rerr != nil && total+int64(n) < opts.Size {
			return res, fmt.Errorf("put entry %s/%s: got %d bytes, declared %d: %w", ns, key, total+int64(n), opts.Size, ErrSizeMismatch)
		}
		if n > 0 {
			data := buf[4 : 4+n]
			total += int64(n)
			if max := s.cfg.MaxEntryBytes; max > 0 && total > max {
				return res, fmt.Errorf("put entry %s/%s: more than %d bytes: %w", ns, key, max, ErrTooLarge)
			}
			if declared && total > opts.Size {
				return res, fmt.Errorf("put entry %s/%s: more than the declared %d bytes: %w", ns, key, opts.Size, ErrSizeMismatch)
			}
			if !bytesHeld {
				c := claim{ns: ns, bytes: int64(n), nsBytes: int64(n), held: held.nsBytes}
				if err := s.reserve(ctx, c); err != nil {
					return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
				}
				held.add(c)
			}
			h.Write(data)
			binary.BigEndian.PutUint32(buf[:4], chunkSum(u, w.n, data))
			if w.n == 0 && (rerr == io.EOF || rerr == io.ErrUnexpectedEOF) {
				if err := s.checkDiskFree(int64(4 + n)); err != nil { // diskfree.go
					return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
				}
				inline = buf[:4+n]
				break
			}
			if err := w.write(n); err != nil {
				return res, fmt.Errorf("put entry %s/%s: write chunk %d: %w", ns, key, w.n, err)
			}
		}
		if rerr != nil { // io.EOF or io.ErrUnexpectedEOF: the body's end
			break
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if opts.SHA256 != nil && *opts.SHA256 != sum {
		return res, fmt.Errorf("put entry %s/%s: body sha256 %s, declared %s: %w", ns, key,
			hex.EncodeToString(sum[:]), hex.EncodeToString(opts.SHA256[:]), ErrDigestMismatch)
	}
	if err := w.wait(); err != nil {
		return res, fmt.Errorf("put entry %s/%s: write chunk %d: %w", ns, key, w.n-1, err)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	if w.n > 0 { // the chunks on disk before the metadata that names them
		if err := s.syncWait(ctx, false); err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
	}

	m := s.newMeta(ref, sum, total, opts)
	blob := &blobRecord{Upload: u.String(), Size: total, ChunkSize: int64(s.cfg.ChunkSize)}
	expected = s.expectSync()
	res, keepChunks, err = s.commit(ref, m, blob, held, inline, w.bytes)
	if err != nil {
		return res, err
	}
	if res.Created {
		held, w.bytes = claim{}, 0 // commit released and settled them
	}
	if res.Created {
		s.log.Debug("entry stored", "namespace", ns, "key", key.String(), "size", total, "new_blob", keepChunks)
	}
	return res, nil
}

// mayExist reports whether ref may be a live entry. The accounting holds
// every live entry from Open on, so false means a new key and its Put skips
// the Badger read of Stat (a tenth of a small PUT's CPU, and a read timestamp
// that waits for commits in flight). An entry committed meanwhile is found
// by commit, which reads again under the write lock.
func (s *Badger) mayExist(ref entryRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acct.has(ref)
}

// verifyExisting finishes a Put whose entry already exists: entries are
// immutable, so it only reads and hashes the body (no staging, no
// reservation, no eviction) and reports a no-op when the bytes are identical
// or ErrConflict when they differ. The Put takes effect as of when it began:
// if the entry is deleted meanwhile, the result still describes it.
func (s *Badger) verifyExisting(ctx context.Context, existing Meta, r io.Reader, opts PutOptions) (PutResult, error) {
	ns, key := existing.Namespace, existing.Key
	sum, _, err := s.hashBody(ctx, ns, key, r, opts)
	if err != nil {
		return PutResult{}, err
	}
	if sum != existing.SHA256 {
		return PutResult{}, fmt.Errorf("put entry %s/%s: stored sha256 %s: %w", ns, key,
			hex.EncodeToString(existing.SHA256[:]), ErrConflict)
	}
	if m, err := s.Stat(ctx, ns, key); err == nil && m.SHA256 == existing.SHA256 {
		existing = m
	}
	return PutResult{Meta: existing}, nil
}

// hashBody reads r to EOF, enforcing the size limits, and checks its SHA-256
// against opts.SHA256. It stores nothing.
func (s *Badger) hashBody(ctx context.Context, ns string, key Key, r io.Reader, opts PutOptions) (sum [32]byte, total int64, err error) {
	buf := s.getBuf()
	defer s.putBuf(buf)
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return sum, total, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		n, rerr := io.ReadFull(r, buf)
		total += int64(n)
		if max := s.cfg.MaxEntryBytes; max > 0 && total > max {
			return sum, total, fmt.Errorf("put entry %s/%s: more than %d bytes: %w", ns, key, max, ErrTooLarge)
		}
		if opts.Size > 0 && total > opts.Size {
			return sum, total, fmt.Errorf("put entry %s/%s: more than the declared %d bytes: %w", ns, key, opts.Size, ErrSizeMismatch)
		}
		h.Write(buf[:n])
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return sum, total, fmt.Errorf("put entry %s/%s: read body: %w", ns, key, rerr)
		}
	}
	if opts.Size > 0 && total != opts.Size {
		return sum, total, fmt.Errorf("put entry %s/%s: got %d bytes, declared %d: %w", ns, key, total, opts.Size, ErrSizeMismatch)
	}
	h.Sum(sum[:0])
	if opts.SHA256 != nil && *opts.SHA256 != sum {
		return sum, total, fmt.Errorf("put entry %s/%s: body sha256 %s, declared %s: %w", ns, key,
			hex.EncodeToString(sum[:]), hex.EncodeToString(opts.SHA256[:]), ErrDigestMismatch)
	}
	if err := ctx.Err(); err != nil {
		return sum, total, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	return sum, total, nil
}

// putKnownBlob finishes a Put of a new entry whose declared SHA-256 names a
// blob of size bytes already stored (pinned by the caller so it cannot be
// freed): it only reads and verifies the body, then commits metadata
// referencing the blob. No bytes are staged and the store's size does not
// grow, but the entry counts in its namespace: the namespace's quota may
// evict its own entries to make room, or refuse it.
func (s *Badger) putKnownBlob(ctx context.Context, ref entryRef, r io.Reader, opts PutOptions, size int64) (PutResult, error) {
	c := claim{ns: ref.ns, nsBytes: size, entry: true}
	if err := s.reserve(ctx, c); err != nil {
		return PutResult{}, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
	}
	sum, total, err := s.hashBody(ctx, ref.ns, ref.key, r, opts)
	if err != nil {
		s.release(c)
		return PutResult{}, err
	}
	res, _, err := s.commit(ref, s.newMeta(ref, sum, total, opts), nil, c, nil, 0)
	if err != nil || !res.Created {
		s.release(c)
	}
	return res, err
}

// newMeta returns the metadata of a new entry.
func (s *Badger) newMeta(ref entryRef, sum [32]byte, size int64, opts PutOptions) Meta {
	now := time.Now().UTC()
	created := now
	if !opts.Created.IsZero() {
		created = opts.Created.UTC()
	}
	return Meta{
		Namespace:      ref.ns,
		Key:            ref.key,
		Size:           size,
		SHA256:         sum,
		Created:        created,
		LastAccess:     now,
		Backend:        opts.Backend,
		Name:           opts.Name,
		CompileSeconds: opts.CompileSeconds,
		Writer:         opts.Writer,
		Run:            opts.Run,
		Labels:         copyMap(opts.Labels),
		Components:     copyMap(opts.Components),
	}
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// commit makes the entry visible: under wmu, in one transaction, it checks
// for an existing entry, writes the blob record when the blob is new, and the
// metadata. blob is nil when no chunks were staged (the blob must exist).
// inline, if not nil, is the blob's single chunk, written in the same
// transaction when the blob is new. keepChunks says whether the staged
// chunks now belong to a blob. When it stores the entry (Created) commit
// releases held and settles the written bytes of the upload's chunks
// (diskbound.go).
func (s *Badger) commit(ref entryRef, m Meta, blob *blobRecord, held claim, inline []byte, written int64) (res PutResult, keepChunks bool, err error) {
	// purge frees the chunks of a quarantined entry this commit replaced,
	// once every lock is released.
	var purge func()
	defer func() {
		if purge != nil {
			purge()
		}
	}()
	if err := s.enterWrite(); err != nil {
		return res, false, err
	}
	defer s.leaveWrite()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	existing, err := s.readMeta(txn, ref)
	switch {
	case err == nil && existing.SHA256 == m.SHA256:
		return PutResult{Meta: s.overlay(existing)}, false, nil
	case err == nil:
		return res, false, fmt.Errorf("put entry %s/%s: stored sha256 %s: %w", ref.ns, ref.key,
			hex.EncodeToString(existing.SHA256[:]), ErrConflict)
	case !errors.Is(err, ErrNotFound):
		return res, false, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
	}
	replaced, err := s.replaceHeldLocked(txn, ref, m.SHA256) // quarantine_life.go
	if err != nil {
		return res, false, err
	}
	s.mu.Lock()
	newBlob := !s.acct.hasBlob(m.SHA256)
	s.mu.Unlock()
	if newBlob && blob == nil {
		// Only a quarantine can remove a pinned blob.
		return res, false, fmt.Errorf("put entry %s/%s: the stored copy of this content was quarantined during the upload; retry", ref.ns, ref.key)
	}
	if newBlob {
		b, err := encodeBlob(*blob)
		if err != nil {
			return res, false, err
		}
		if inline != nil {
			u, err := blob.uploadID()
			if err != nil {
				return res, false, err
			}
			if err := txn.Set(chunkKey(u, 0), inline); err != nil {
				return res, false, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
			}
		}
		if err := txn.Set(blobKey(m.SHA256), b); err != nil {
			return res, false, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
		}
	}
	b, err := encodeMeta(m)
	if err != nil {
		return res, false, err
	}
	if err := txn.Set(metaKey(ref.ns, ref.key), b); err != nil {
		return res, false, fmt.Errorf("put entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if err := txn.Commit(); err != nil {
		return res, false, fmt.Errorf("put entry %s/%s: commit: %w", ref.ns, ref.key, err)
	}
	s.hotMeta.forget(ref) // hotmeta.go
	if replaced != nil {
		purge = replaced()
	}
	if newBlob && inline != nil {
		s.diskWrote(int64(len(inline)), false)
	}
	s.diskSettle(written)
	s.diskIndexed()
	s.mu.Lock()
	s.acct.add(ref, m.SHA256, m.Size, m.LastAccess)
	s.acct.releaseClaim(held)
	s.mu.Unlock()
	return PutResult{Meta: m, Created: true}, newBlob, nil
}

// pin keeps the blob sha from being freed until unpin, if it is stored; it
// returns the token for unpin, or nil.
func (s *Badger) pin(sha [32]byte) *acctBlob {
	if s.enter() != nil {
		return nil
	}
	defer s.leave()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acct.pin(sha)
}

// unpin undoes pin, freeing the blob if no entry uses it any more.
//
// The pin is released whatever happens: only freeing the blob writes. A
// Put that the directory broke under (ErrDirUnavailable) used to leave its
// pin, since the release waited for a write that was refused: the blob
// then outlived its last entry until restart, its bytes counted against
// MaxBytes. Where the blob is unused and cannot be deleted now (the
// directory is not writable), the accounting forgets it all the same and
// the next Open collects its record and chunks (recover, badger.go).
func (s *Badger) unpin(sha [32]byte, token *acctBlob) {
	var purge func()
	defer func() {
		if purge != nil {
			purge()
		}
	}()
	if err := s.enterWrite(); err != nil {
		if s.enter() != nil {
			return // closed: the accounting is gone with the store
		}
		defer s.leave()
		s.wmu.Lock() // as pin: a commit reads and adds blobs under it
		s.mu.Lock()
		free := s.acct.unpin(sha, token)
		s.mu.Unlock()
		s.wmu.Unlock()
		if free {
			s.log.Warn("a blob no entry uses any more is not deleted while the data directory is not writable; the next start collects it", "sha256", hex.EncodeToString(sha[:]), "err", err)
		}
		return
	}
	defer s.leaveWrite()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	free := s.acct.unpin(sha, token)
	s.mu.Unlock()
	if free {
		var err error
		if purge, err = s.deleteBlobLocked(sha); err != nil {
			s.log.Warn("free unpinned blob failed; it is collected at the next open", "sha256", hex.EncodeToString(sha[:]), "err", err)
		}
	}
}

// writeChunk commits one chunk in its own transaction.
func (s *Badger) writeChunk(key, val []byte) error {
	if err := s.enterWrite(); err != nil {
		return err
	}
	defer s.leaveWrite()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(key, val); err != nil {
		return err
	}
	return txn.Commit()
}

// sync fsyncs the value log and the write-ahead log. It runs on the
// syncer's goroutine only (groupsync.go), which Close stops before it
// closes the database, so it needs no enter.
func (s *Badger) sync() error {
	return s.db.Sync()
}

func (s *Badger) getBuf() []byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 4+s.cfg.ChunkSize)
}

func (s *Badger) putBuf(b []byte) {
	if cap(b) != 4+s.cfg.ChunkSize {
		return
	}
	b = b[:cap(b)]
	s.bufs.Put(&b)
}
