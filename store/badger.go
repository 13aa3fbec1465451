package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger is a Store backed by a Badger directory. It is safe for concurrent
// use. Create one with Open.
type Badger struct {
	cfg Config
	db  *badger.DB
	log *slog.Logger

	// readers defers the purge of chunks that readers are streaming.
	readers readerHolds

	// closeMu is held shared by every short operation on db and exclusively
	// by Close, so that the database never closes under an operation.
	closeMu sync.RWMutex
	closed  bool

	// gcMu is held shared by every operation that writes to db and
	// exclusively by value-log GC. Badger's GC reads the memtable's max
	// version without synchronizing with concurrent writes (a data race in
	// Badger v4.9.6, value.go rewrite -> DB.MaxVersion), so writes pause
	// while it runs; reads go on. Lock order: closeMu, gcMu, wmu, mu.
	gcMu sync.RWMutex

	// wmu serializes metadata writes (commits, deletes, evictions,
	// quarantines, access flushes) so that accounting and disk agree.
	wmu sync.Mutex
	// mu guards acct.
	mu   sync.Mutex
	acct *accounting

	// bufs holds chunk buffers of 4+ChunkSize bytes.
	bufs sync.Pool

	// metas and blobs cache decoded metadata and blob records
	// (metacache.go).
	metas recordCache[entryRef, Meta]
	blobs recordCache[[32]byte, blobRecord]
	// hot holds the bytes of small, recently read blobs (hotcache.go).
	hot hotCache
	// hotMeta holds the metadata of entries whose blob is hot (hotmeta.go).
	hotMeta hotMetas

	stop chan struct{}
	wg   sync.WaitGroup

	// orphanChunks counts chunks collected at Open (for tests and logs).
	orphanChunks int
	// garbageChunks counts chunks deleted since the last maintenance pass,
	// garbageBytes roughly their bytes since the last GC kick.
	garbageChunks atomic.Int64
	garbageBytes  atomic.Int64
	// lastWide is when maintain last flushed a spanning table (UnixNano).
	lastWide atomic.Int64
	// flattenAfter is when maintain may next flatten the LSM tree
	// (UnixNano; 0: at once), set by the last flatten and cleared by
	// evictForDisk (gc.go).
	flattenAfter atomic.Int64
	// lsmMu serializes flattens and memtable flushes (gc.go): Badger's
	// Flatten and DropPrefix both stop and restart the compactors, which
	// two at once would leave doubled. Lock order: lsmMu, then gcMu.
	lsmMu sync.Mutex
	// gcExhausted is set by a GC pass that found nothing to reclaim while
	// the directory pressed on its disk bound, even after flattening the
	// LSM tree: what the directory holds is live, and only evicting makes
	// room (evictForDisk).
	gcExhausted atomic.Bool
	// gcKick asks the GC loop for a pass now (diskbound.go).
	gcKick chan struct{}
	// disk is the store's view of its directory's size (diskbound.go).
	disk diskState
	// expiryKick asks the expiry loop for a pass now; expiry holds the
	// loop's own state (expiry.go).
	expiryKick chan struct{}
	expiry     expiryState
	// syncer shares fsyncs among concurrent Puts under Config.SyncWrites
	// (groupsync.go); nil without it.
	syncer *groupSync
	// freeSpace is the last reading of the disk's free space (diskfree.go).
	freeSpace freeSpace
	// dirID is the directory opened, dirWatch what watchDir last found
	// (dirhealth.go).
	dirID    dirID
	dirWatch dirWatch
	// commitChunk commits one chunk's transaction asynchronously
	// (chunkwriter.go); tests replace it to fail a commit in flight, which
	// Badger cannot be made to do on demand.
	commitChunk func(txn *badger.Txn, done func(error))
}

var _ Store = (*Badger)(nil)

// Open opens (creating if needed) the store in cfg.Dir, collects chunks left
// behind by uploads that never committed, loads the accounting and starts the
// background access flusher and value-log GC.
func Open(cfg Config) (*Badger, error) {
	if cfg.Dir == "" {
		return nil, errors.New("open store: Config.Dir is empty")
	}
	if cfg.ChunkSize != 0 && (cfg.ChunkSize < 4<<10 || cfg.ChunkSize > 64<<20) {
		return nil, fmt.Errorf("open store %s: chunk size %d is outside 4 KiB to 64 MiB", cfg.Dir, cfg.ChunkSize)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Quotas.validate(); err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	if cfg.MinFreeDisk >= 0 {
		if err := checkOpenFree(cfg.Dir, cfg.openFree(), diskFree); err != nil {
			return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
		}
	}
	// Before Badger touches the directory: one written in a newer format
	// is left exactly as it is (format.go).
	if err := checkFormat(cfg.Dir, cfg.Version); err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	db, err := badger.Open(cfg.badgerOptions())
	if err != nil && strings.Contains(err.Error(), "Cannot acquire directory lock") {
		// Badger formats the lock's cause with %+v, wrapping nothing a
		// caller could test: only its text tells (TestOpenInUse holds this
		// to the Badger in go.mod).
		return nil, fmt.Errorf("open store %s: %w: %w", cfg.Dir, ErrInUse, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	s := &Badger{
		cfg:    cfg,
		db:     db,
		log:    cfg.Logger.With("component", "store"),
		acct:   newAccounting(cfg.MaxBytes),
		stop:   make(chan struct{}),
		gcKick: make(chan struct{}, 1),
	}
	s.expiryKick = make(chan struct{}, 1)
	s.acct.setQuotas(cfg.Quotas.clone())
	s.disk.pass = make(chan struct{})
	s.metas.clone = cloneMeta // callers may change a Meta's maps
	s.hot.max = cfg.HotCacheBytes
	// Badger has just opened it, so a failure here would be a race with its
	// removal: DirErr says so at the first look.
	s.dirID, _ = statDirID(cfg.Dir)
	s.dirWatch.epoch = time.Now()
	if err := s.recover(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	// Only now, holding Badger's lock: a second process must not rewrite
	// the marker of a directory it cannot open.
	if err := writeFormat(cfg.Dir, cfg.Version); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	s.rescanDisk()
	// A smaller MaxBytes than last time: evict down to it now.
	if err := s.reserve(context.Background(), claim{}); err != nil {
		s.log.Warn("evict down to the size limit failed", "err", err)
	}
	u := s.Usage()
	s.log.Info("store opened", "dir", cfg.Dir, "entries", u.Entries, "blobs", u.Blobs,
		"bytes", u.Bytes, "max_bytes", u.MaxBytes, "disk_bytes", u.DiskBytes, "max_disk_bytes", cfg.MaxDiskBytes,
		"value_log_file_size", cfg.ValueLogFileSize, "orphan_chunks", s.orphanChunks, "sync_writes", cfg.SyncWrites)
	s.wg.Add(1)
	go s.flushLoop()
	if cfg.SyncWrites {
		s.syncer = newGroupSync(s.sync)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.syncer.run(s.stop)
		}()
	}
	if cfg.GCInterval > 0 {
		s.wg.Add(1)
		go s.gcLoop()
	}
	if cfg.ExpiryInterval > 0 {
		s.wg.Add(1)
		go s.expiryLoop() // its first pass evicts down to lowered quotas
	}
	return s, nil
}

// recover loads blobs and entries, drops entries whose blob is missing, blobs
// no entry uses, and chunks no blob names.
func (s *Badger) recover() error {
	var found foundBlobs // recoverscan.go
	var loaded []loadedEntry
	var broken [][]byte

	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixBlob), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var sha [32]byte
			copy(sha[:], item.Key()[len(prefixBlob):])
			var rec blobRecord
			var u uploadID
			err := item.Value(func(v []byte) error {
				var err error
				rec, err = decodeBlobScan(v) // recoverscan.go
				return err
			})
			if err == nil {
				u, err = rec.uploadID()
			}
			if err != nil {
				// Its entries are dropped below as having no blob.
				s.log.Warn("dropping unreadable blob record", "sha256", hex.EncodeToString(sha[:]), "err", err)
				broken = append(broken, item.KeyCopy(nil))
				continue
			}
			found.list = append(found.list, foundBlob{sha: sha, u: u, size: rec.Size})
		}
		it.Close()
		found.sort()

		loaded, broken = s.scanEntries(txn, &found, broken) // recoverscan.go
		s.recoverHeld(txn, &found)                          // quarantine_life.go
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan entries: %w", err)
	}
	live := make([]uploadID, 0, len(found.list))
	for _, b := range found.list {
		if b.used {
			live = append(live, b.u)
		} else {
			broken = append(broken, blobKey(b.sha))
		}
	}
	found = foundBlobs{}
	if err := s.deleteKeys(broken); err != nil {
		return fmt.Errorf("drop broken records: %w", err)
	}
	// Chunk keys sort by upload id: walk them beside the sorted live ids.
	slices.SortFunc(live, func(x, y uploadID) int { return bytes.Compare(x[:], y[:]) })
	var orphans [][]byte
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixChunk), PrefetchValues: false})
		defer it.Close()
		next := 0
		for it.Rewind(); it.Valid(); it.Next() {
			u, ok := parseChunkKey(it.Item().Key())
			for ok && next < len(live) && bytes.Compare(live[next][:], u[:]) < 0 {
				next++
			}
			if !ok || next == len(live) || live[next] != u {
				orphans = append(orphans, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan chunks: %w", err)
	}
	if err := s.deleteKeys(orphans); err != nil {
		return fmt.Errorf("collect orphan chunks: %w", err)
	}
	s.orphanChunks = len(orphans)
	s.garbageChunks.Add(int64(len(orphans)))
	s.acct.load(loaded)
	return nil
}

// deleteKeys deletes keys in batches.
func (s *Badger) deleteKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("delete key: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("flush deletes: %w", err)
	}
	return nil
}

// purgeChunks deletes the n chunks, size bytes in all, of an upload that no
// blob names (any more). Failures are logged: whatever is left is collected
// at the next Open.
func (s *Badger) purgeChunks(u uploadID, n uint32, size int64) {
	if n == 0 || s.readers.deferPurge(u, n, size) { // readerhold.go
		return
	}
	if err := s.enterWrite(); err != nil {
		if errors.Is(err, ErrDirUnavailable) {
			s.skipWrite("chunk purge", "the chunks of deleted and evicted entries stay until the next start collects them", err)
		}
		return // collected at the next Open
	}
	defer s.leaveWrite()
	keys := make([][]byte, 0, min(n, 4096))
	flush := func() {
		if err := s.deleteKeys(keys); err != nil {
			s.log.Warn("delete chunks failed; they will be collected at the next open", "upload", u.String(), "err", err)
		}
		keys = keys[:0]
	}
	s.garbageChunks.Add(int64(n))
	// The chunks' real bytes, not n whole chunks: counting each 4 KiB
	// entry as a 1 MiB chunk kicked a GC pass (a memtable flush that pauses
	// writes) every few dozen evictions or deletes of small entries.
	if s.garbageBytes.Add(size) >= 2*s.cfg.ValueLogFileSize {
		// Reclaim as eviction frees: a file's worth of garbage is a GC step.
		s.garbageBytes.Store(0)
		s.kickGC()
	}
	for i := uint32(0); i < n; i++ {
		keys = append(keys, chunkKey(u, i))
		if len(keys) == cap(keys) {
			flush()
		}
	}
	flush()
}

// Stat returns the entry's metadata without counting an access.
func (s *Badger) Stat(ctx context.Context, ns string, key Key) (Meta, error) {
	if err := checkNamespace("stat entry", ns); err != nil {
		return Meta{}, err
	}
	if err := s.enter(); err != nil {
		return Meta{}, err
	}
	defer s.leave()
	ref := entryRef{ns, key}
	if m, ok := s.hotMeta.get(ref); ok { // hotmeta.go
		return s.overlay(m), nil
	}
	var m Meta
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		m, err = s.readMetaCached(txn, ref)
		return err
	})
	if err != nil {
		return Meta{}, err
	}
	return s.overlay(m), nil
}

// readMeta reads an entry's stored metadata; a miss returns ErrNotFound.
func (s *Badger) readMeta(txn *badger.Txn, ref entryRef) (Meta, error) {
	item, err := txn.Get(metaKey(ref.ns, ref.key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Meta{}, ErrNotFound
	}
	if err != nil {
		return Meta{}, fmt.Errorf("read metadata of %s/%s: %w", ref.ns, ref.key, err)
	}
	return itemMeta(ref, item)
}

// overlay adds batched, not yet written access state to stored metadata.
func (s *Badger) overlay(m Meta) Meta {
	s.mu.Lock()
	atime, hits, ok := s.acct.access(entryRef{m.Namespace, m.Key})
	s.mu.Unlock()
	if ok {
		if atime.After(m.LastAccess) {
			m.LastAccess = atime
		}
		m.Hits += hits
	}
	return m
}

// Delete removes the entry; its blob is freed when no other entry uses it.
func (s *Badger) Delete(ctx context.Context, ns string, key Key) error {
	if err := checkNamespace("delete entry", ns); err != nil {
		return err
	}
	if err := s.enterWrite(); err != nil {
		return err
	}
	s.wmu.Lock()
	purge, err := s.deleteLocked(entryRef{ns, key}, "")
	s.wmu.Unlock()
	s.leaveWrite()
	if err != nil {
		return err
	}
	purge()
	return nil
}

// deleteLocked removes an entry (moving its metadata under the quarantine
// prefix when reason is set) and its blob if this was the last reference. The
// caller holds wmu and must call the returned purge after releasing it.
func (s *Badger) deleteLocked(ref entryRef, reason string) (purge func(), err error) {
	nop := func() {}
	s.mu.Lock()
	sha, lastRef, ok := s.acct.lookup(ref)
	s.mu.Unlock()
	if !ok {
		return s.deleteHeldLocked(ref) // quarantine_life.go
	}
	var blob blobRecord
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	mk := metaKey(ref.ns, ref.key)
	if reason != "" {
		if item, err := txn.Get(mk); err == nil {
			v, err := item.ValueCopy(nil)
			if err == nil {
				m, derr := decodeMeta(ref, v)
				if derr == nil {
					rec := metaRecord{Meta: m, SHA256: hex.EncodeToString(m.SHA256[:]), Reason: reason,
						QuarantinedAt: time.Now().UTC(), Cause: CauseCorrupt}
					if b, err := json.Marshal(rec); err == nil {
						_ = txn.Set(entryKey(prefixQuarantine, ref.ns, ref.key), b)
					}
				}
			}
		}
	}
	if err := txn.Delete(mk); err != nil {
		return nop, fmt.Errorf("delete entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if err := txn.Delete(reportKey(ref.ns, ref.key)); err != nil {
		return nop, fmt.Errorf("delete entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if lastRef {
		item, err := txn.Get(blobKey(sha))
		if err == nil {
			err = item.Value(func(v []byte) error {
				blob, err = decodeBlob(v)
				return err
			})
		}
		if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			return nop, fmt.Errorf("delete entry %s/%s: read blob: %w", ref.ns, ref.key, err)
		}
		if err := txn.Delete(blobKey(sha)); err != nil {
			return nop, fmt.Errorf("delete entry %s/%s: %w", ref.ns, ref.key, err)
		}
		s.hot.drop(sha) // hotcache.go
	}
	if err := txn.Commit(); err != nil {
		return nop, fmt.Errorf("delete entry %s/%s: %w", ref.ns, ref.key, err)
	}
	s.hotMeta.forget(ref) // hotmeta.go
	// The tombstones go to a memtable too (diskbound_lsm.go).
	s.diskIndexed()
	s.mu.Lock()
	s.acct.remove(ref)
	s.mu.Unlock()
	if !lastRef || blob.ChunkSize == 0 {
		return nop, nil
	}
	u, err := blob.uploadID()
	if err != nil {
		return nop, nil
	}
	n, size := blob.chunks(), blob.Size
	return func() { s.purgeChunks(u, n, size) }, nil
}

// deleteBlobLocked deletes the record of a blob no entry uses and returns
// the purge of its chunks, to call after releasing wmu (which the caller
// holds).
func (s *Badger) deleteBlobLocked(sha [32]byte) (purge func(), err error) {
	nop := func() {}
	var blob blobRecord
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	item, err := txn.Get(blobKey(sha))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nop, nil
	}
	if err == nil {
		err = item.Value(func(v []byte) error {
			blob, err = decodeBlob(v)
			return err
		})
	}
	if err != nil {
		return nop, fmt.Errorf("delete blob: %w", err)
	}
	if err := txn.Delete(blobKey(sha)); err != nil {
		return nop, fmt.Errorf("delete blob: %w", err)
	}
	s.hot.drop(sha) // hotcache.go
	if err := txn.Commit(); err != nil {
		return nop, fmt.Errorf("delete blob: %w", err)
	}
	u, err := blob.uploadID()
	if err != nil {
		return nop, nil
	}
	n, size := blob.chunks(), blob.Size
	return func() { s.purgeChunks(u, n, size) }, nil
}

// Usage returns sizes and counters.
func (s *Badger) Usage() Usage {
	disk := s.diskBytes() // diskbound.go
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.acct.usage()
	u.DiskBytes = disk
	return u
}

// Close flushes batched access state, stops background work and closes
// Badger. Operations after Close return ErrClosed; readers still open fail.
func (s *Badger) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	close(s.stop)
	s.wg.Wait()
	ferr := s.flushAccessAtClose() // dirhealth.go
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	if ferr != nil {
		return fmt.Errorf("close store: %w", ferr)
	}
	s.log.Info("store closed", "dir", s.cfg.Dir)
	return nil
}

// badgerLogger sends Badger's logs to slog; Badger's chatty info messages go
// to debug level.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) msg(f string, a []any) string {
	return strings.TrimSpace(fmt.Sprintf(f, a...))
}

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(b.msg(f, a), "component", "badger")
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(b.msg(f, a), "component", "badger")
}

func (b badgerLogger) Infof(f string, a ...any) { b.debug(f, a) }

func (b badgerLogger) Debugf(f string, a ...any) { b.debug(f, a) }

// debug logs at debug level, formatting only when that level is on: Badger
// logs a debug line for every write batch (~3% of a small PUT's CPU).
func (b badgerLogger) debug(f string, a []any) {
	if b.l.Enabled(context.Background(), slog.LevelDebug) {
		b.l.Debug(b.msg(f, a), "component", "badger")
	}
}
