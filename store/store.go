// Package store keeps compiled executables addressed by (namespace, key).
//
// An entry is immutable metadata plus a content-addressed blob: blobs are
// deduplicated by SHA-256, written in checksummed chunks, and an entry becomes
// visible only after all its bytes are committed. The package knows nothing of
// HTTP, plugins or signatures; callers translate its sentinel errors at their
// edge.
//
// # The Badger store
//
// Open returns *Badger, the Store kept in a Badger directory. A Put streams
// the body in 1 MiB chunks, each stored with a CRC-32C that also covers the
// chunk's upload and position, while computing the SHA-256; the chunks go to
// Badger's value log under a fresh upload id, and the entry's metadata (with,
// for new content, the blob record naming the upload) commits last in one
// transaction; a blob that fits in one chunk commits in that transaction too. Neither side ever holds a whole blob in memory. Get verifies
// every chunk it serves; a bad chunk quarantines every entry sharing the blob
// (their metadata moves under a quarantine prefix, the chunks are deleted)
// and counts Usage.IntegrityFailures. On Open, chunks that no committed blob
// names (uploads cut short by a crash) are deleted.
//
// Under Config.MaxBytes, least recently accessed entries are evicted to make
// room. Config.Quotas (and SetQuotas) bound namespaces: a Put into a
// namespace at its quota evicts that namespace's own least recently used
// entries (each namespace keeps its own LRU list; the store's oldest entry
// is the oldest of their tails), one that can never fit fails with
// ErrQuota, and a background loop expires entries past their namespace's
// MaxIdle or MaxAge in passes of bounded work (expiry.go). Access times and hit counts are kept in memory and written in batches
// (every Config.FlushInterval and on Close), never once per read. Deleted and
// evicted bytes return to the disk through Badger's value-log GC, which the
// store drives every Config.GCInterval.
//
// # Durability
//
// An acknowledged Put (one that returned without error) survives a crash or
// kill -9 of the process: Badger's logs are memory-mapped, so a committed
// write is in the kernel's page cache when Put returns. With
// Config.SyncWrites it also survives an OS crash or power loss: Put then
// fsyncs the value log and write-ahead log before committing the metadata
// (when it wrote chunks of its own) and again after, before it returns;
// concurrent Puts share these fsyncs (group commit, groupsync.go). A Put
// that answers with an entry another Put stored waits for a sync too, and a
// failed sync fails the Put. Without SyncWrites (the default) a
// power loss can lose entries acknowledged in the last seconds; what remains
// is never served damaged, because chunk checksums catch torn writes.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/wire"
)

// Sentinel errors, one per outcome. Callers match them with errors.Is.
var (
	// ErrNotFound means no entry exists under (namespace, key).
	ErrNotFound = errors.New("entry not found")
	// ErrConflict means an entry exists under the key with different bytes.
	ErrConflict = errors.New("entry exists with different content")
	// ErrDigestMismatch means the bytes received do not match the SHA-256 the
	// writer declared; nothing was stored.
	ErrDigestMismatch = errors.New("content does not match the declared sha256")
	// ErrTooLarge means the entry exceeds the maximum entry size.
	ErrTooLarge = errors.New("entry exceeds the maximum entry size")
	// ErrFull means the entry cannot fit under the store's size limit even
	// after evicting every evictable entry.
	ErrFull = errors.New("store is full")
	// ErrNeverFits means the entry is larger than the store's size limit
	// (Config.MaxBytes), so it cannot fit even in an empty store: unlike
	// other ErrFull refusals, no retry stores it. It wraps ErrFull.
	ErrNeverFits = fmt.Errorf("the entry is larger than the whole store (--max-size), so it can never fit: %w", ErrFull)
	// ErrCorrupt means stored bytes failed their checksum; the entry has been
	// quarantined and is no longer visible.
	ErrCorrupt = errors.New("stored entry is corrupt")
	// ErrInUse means Open found the store's directory locked by another
	// process (most often a second server started on the same directory).
	ErrInUse = errors.New("the store's directory is in use by another process")
	// ErrClosed means the store has been closed.
	ErrClosed = errors.New("store is closed")
	// ErrSizeMismatch means the body was longer or shorter than the size the
	// writer declared; nothing was stored.
	ErrSizeMismatch = errors.New("content length does not match the declared size")
	// ErrInvalid means an argument is malformed (namespace, labels, offset);
	// nothing was read or stored.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnavailable means a storage tier the operation needs (the shared S3
	// tier) cannot be reached or answered with a server error; nothing was
	// stored. Retrying later may succeed.
	ErrUnavailable = errors.New("storage tier is unavailable")
	// ErrQueueFull means a write-behind store's upload queue is at its bound
	// (entries or bytes) and the entry was not accepted; nothing was stored.
	// The queue drains as the shared tier takes uploads, so retrying later
	// may succeed (the api answers 503 with Retry-After).
	ErrQueueFull = errors.New("upload queue is full")
	// ErrQuarantined means the entry is quarantined (reported as unloadable)
	// and a Put brought the same bytes again; nothing was stored. Different
	// bytes replace a quarantined entry.
	ErrQuarantined = errors.New("entry is quarantined")
	// ErrDirUnavailable means the store's directory is gone or not
	// writable (Badger.DirErr) and the store refused a write before Badger
	// saw it; nothing was written. Reads go on. Writes resume by themselves
	// once the directory is writable again; a directory that was removed
	// needs a restart.
	ErrDirUnavailable = errors.New("the data directory is gone or not writable")
)

// Key is a cache key (cachekey.Key); the store addresses entries by
// (namespace, Key).
type Key = cachekey.Key

// DefaultNamespace is the namespace that always exists.
const DefaultNamespace = cachekey.DefaultNamespace

// MaxLabels bounds the number of labels an entry carries; MaxLabelLen bounds
// each label's key and value.
const (
	MaxLabels   = 16
	MaxLabelLen = 256
)

// MaxComponents bounds the number of signature components an entry carries;
// each key and value is bounded by MaxLabelLen.
const MaxComponents = 64

// StorableComponents returns the components a Put accepts: nil past
// MaxComponents, and without any key or value longer than MaxLabelLen.
// Components only explain misses, so an upload keeps what fits rather than
// fail over them.
func StorableComponents(c map[string]string) map[string]string {
	if len(c) == 0 || len(c) > MaxComponents {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		if len(k) <= MaxLabelLen && len(v) <= MaxLabelLen {
			out[k] = v
		}
	}
	return out
}

// Meta describes one entry. It is what HEAD returns and what every listing
// carries; it never includes the blob itself.
type Meta struct {
	Namespace      string            `json:"namespace"`
	Key            Key               `json:"-"`
	Size           int64             `json:"size"`
	SHA256         [32]byte          `json:"-"`
	Created        time.Time         `json:"created"`
	LastAccess     time.Time         `json:"last_access"`
	Hits           int64             `json:"hits"`
	Backend        string            `json:"backend,omitempty"`
	Name           string            `json:"name,omitempty"`
	CompileSeconds float64           `json:"compile_seconds,omitempty"`
	Writer         string            `json:"writer,omitempty"`
	Run            string            `json:"run,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Components are the named digests or short values of the signature that
	// produced the key (see keying); kept so that misses can be explained.
	Components map[string]string `json:"components,omitempty"`
}

// PutOptions carries what a writer declares about an entry. The zero value
// declares nothing.
type PutOptions struct {
	// SHA256, when non-nil, is the digest the writer claims; a mismatch stores
	// nothing and returns ErrDigestMismatch.
	SHA256 *[32]byte
	// Size is the declared length, or -1 when unknown. A declared size over
	// the limit fails before any byte is read.
	Size           int64
	Backend        string
	Name           string
	CompileSeconds float64
	Writer         string
	Run            string
	Labels         map[string]string
	Components     map[string]string
	// Created, when not zero, is the creation time the entry records in
	// place of now: an import keeps the time the entry was first stored.
	// Its last access is still now (it arrived now).
	Created time.Time
}

// PutResult says what a Put did.
type PutResult struct {
	Meta Meta
	// Created is true when this call stored a new entry, false when an entry
	// with identical bytes already existed (a no-op).
	Created bool
}

// Usage is a snapshot of the store's size and counters, in the form the API
// reports it (wire.StoreUsage).
type Usage = wire.StoreUsage

// Store is the executable store. Implementations are safe for concurrent use.
type Store interface {
	// Put streams r into the entry (ns, key). It reads r to EOF unless it fails
	// first. Nothing is visible until every byte is committed; on any error,
	// including ctx cancellation and a reader error, nothing is stored.
	// An existing entry with the same bytes gives Created=false and no error;
	// with different bytes, ErrConflict and the stored entry is untouched.
	Put(ctx context.Context, ns string, key Key, r io.Reader, opts PutOptions) (PutResult, error)

	// Get returns the entry's metadata and a reader over bytes [off, off+n) of
	// its blob (n < 0 means to the end). The caller must Close the reader.
	// The reader verifies every chunk it reads; on a mismatch it returns an
	// error wrapping ErrCorrupt and the entry is quarantined. A miss returns
	// ErrNotFound. Get counts as an access (hits, last access, batched).
	Get(ctx context.Context, ns string, key Key, off, n int64) (Meta, io.ReadCloser, error)

	// Stat returns the entry's metadata without counting an access.
	Stat(ctx context.Context, ns string, key Key) (Meta, error)

	// Delete removes the entry; its blob is freed when no other entry uses it.
	// A miss returns ErrNotFound.
	Delete(ctx context.Context, ns string, key Key) error

	// Walk calls fn with the metadata of every entry in ns ("" for every
	// namespace), in key order, until fn returns false or ctx ends. It does not
	// count as an access. fn must not call back into the store.
	Walk(ctx context.Context, ns string, fn func(Meta) bool) error

	// Usage returns sizes and counters.
	Usage() Usage

	// Close flushes batched state and releases the store.
	Close() error
}

// Serving reports whether st answers requests (nil, or why not), for
// readiness probes: through its Ready method when it has one, else by a
// lookup of the all-zero key (no plugin makes it), which an open store
// answers with ErrNotFound and a closed one with ErrClosed.
func Serving(ctx context.Context, st interface {
	Stat(ctx context.Context, ns string, key Key) (Meta, error)
}) error {
	if r, ok := st.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	_, err := st.Stat(ctx, DefaultNamespace, Key{})
	if err == nil || errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
