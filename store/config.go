package store

import (
	"log/slog"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Default tuning values, used when the matching Config field is zero.
const (
	// DefaultChunkSize is the default Config.ChunkSize.
	DefaultChunkSize = 1 << 20
	// DefaultFlushInterval is the default Config.FlushInterval.
	DefaultFlushInterval = 5 * time.Second
	// DefaultGCInterval is the default Config.GCInterval.
	DefaultGCInterval = time.Minute
	// DefaultGCDiscardRatio is the default Config.GCDiscardRatio.
	DefaultGCDiscardRatio = 0.5
	// DefaultMemTableSize is the default Config.MemTableSize.
	DefaultMemTableSize = 16 << 20
	// DefaultValueLogFileSize is the default Config.ValueLogFileSize of a
	// store without MaxBytes.
	DefaultValueLogFileSize = 256 << 20
	// DefaultDiskWait is the default Config.DiskWait.
	DefaultDiskWait = time.Second
	// DefaultBlockCacheSize is the default Config.BlockCacheSize.
	DefaultBlockCacheSize = 16 << 20
	// DefaultValueThreshold is the default Config.ValueThreshold.
	DefaultValueThreshold = 1 << 10
	// DefaultExpiryInterval is the default Config.ExpiryInterval.
	DefaultExpiryInterval = time.Minute
	// DefaultExpiryBatch is the default Config.ExpiryBatch.
	DefaultExpiryBatch = 4096
)

// Config configures a Badger store. The zero value of every field except Dir
// means its default.
type Config struct {
	// Dir is the Badger directory; it is created if missing. Required.
	Dir string
	// MaxBytes bounds the logical bytes of unique blobs; 0 means unlimited.
	// Least recently accessed entries are evicted to make room; a Put that
	// cannot fit even after evicting everything fails with ErrFull.
	MaxBytes int64
	// MaxEntryBytes bounds one entry's size; 0 means unlimited. Larger Puts
	// fail with ErrTooLarge.
	MaxEntryBytes int64
	// OnEvict, when set, is called with the metadata of every entry the
	// store removes on its own (not for Delete or quarantine) and why:
	// reason is ReasonSize or ReasonQuota (evicted to make room under
	// MaxBytes or a namespace's Quota) or ReasonIdle or ReasonAge (expired
	// under a namespace's MaxIdle or MaxAge). It runs after the removal
	// commits and outside the store's locks, on the goroutine of the Put
	// that needed the room or of the expiry loop. It must be quick; it may
	// call the store. Usage.Evictions counts the same events and
	// Usage.Namespaces splits them by namespace and reason, since the store
	// opened: a caller that keeps them across restarts counts them here.
	OnEvict func(m Meta, reason string)
	// OnQuarantine, when set, is called with the namespace and key of every
	// entry the store quarantines (by an admin, by clients' reports, or
	// because its bytes failed their checksum; an entry sharing a corrupt
	// blob is quarantined with it), once the quarantine has committed. It
	// runs on the goroutine that quarantined the entry, which may hold the
	// store's write lock: it must be quick and must not call the store.
	// Restore does not call it: its caller has the restored metadata.
	OnQuarantine func(ns string, key Key)
	// Quotas bound namespaces (bytes, entries, idle time, age) from the
	// start; SetQuotas replaces them while the store runs. The zero value
	// bounds nothing.
	Quotas Quotas
	// ExpiryInterval is how often the expiry loop runs a pass (expiry.go):
	// it evicts entries of namespaces over a lowered quota and expires
	// entries past their namespace's MaxIdle or MaxAge. Default 1m;
	// negative disables the loop (quotas still bound every Put).
	ExpiryInterval time.Duration
	// ExpiryBatch bounds one expiry pass: at most this many entries removed
	// and this many metadata records read (for MaxAge), besides a look at
	// each bounded namespace's LRU tail in memory. Default 4096.
	ExpiryBatch int
	// Version names this binary (e.g. "cachesvc v1.2.3 (rev abc123)") in
	// the directory's format marker (FormatFile), so that an older binary's
	// refusal of the directory names the one that wrote it. Optional.
	Version string
	// Logger receives the store's logs (and Badger's, at debug level for its
	// info messages). nil means slog.Default().
	Logger *slog.Logger

	// SyncWrites makes every acknowledged Put durable against power loss and
	// OS crashes: the store fsyncs the value log and the write-ahead log after
	// a Put's chunks are written and again after its metadata commits, before
	// Put returns. Concurrent Puts share the fsyncs (group commit: one sync
	// in flight, which serves every Put that asked before it started). A
	// failed sync fails the Put; its entry may then be stored but not yet
	// durable, and a retry of the same upload answers once it is.
	//
	// Without it (the default) an acknowledged Put survives a crash or kill of
	// the process — Badger's files are memory-mapped, so committed writes are
	// in the kernel's page cache the moment Put returns — but an OS crash or
	// power loss may lose recently acknowledged entries. Even then nothing
	// damaged is served: chunk checksums catch torn data and the entry is
	// quarantined.
	SyncWrites bool

	// ChunkSize is the size of the checksummed chunks blobs are stored in,
	// from 4 KiB to 64 MiB. Default 1 MiB. Changing it affects only new
	// blobs.
	ChunkSize int
	// FlushInterval is how often batched access times and hit counts are
	// written to the metadata. Default 5s. Close flushes too.
	FlushInterval time.Duration
	// GCInterval is how often Badger's value-log garbage collection runs so
	// that deleted and evicted bytes return to the disk. Default 1m; negative
	// disables it.
	GCInterval time.Duration
	// GCDiscardRatio is the fraction of a value-log file that must be garbage
	// before GC rewrites it. Default 0.5.
	GCDiscardRatio float64
	// MemTableSize is Badger's memtable size. Default 16 MiB: chunks live in
	// the value log, so memtables hold only keys, pointers and metadata.
	MemTableSize int64
	// ValueLogFileSize is the size of one Badger value-log file, the step in
	// which GC returns evicted bytes to the disk. Default: MaxBytes/32,
	// between 2×ChunkSize and 256 MiB (so a 200 MB store reclaims in 6 MB
	// steps); 256 MiB without MaxBytes.
	ValueLogFileSize int64
	// BlockCacheSize is Badger's block cache size. Default 16 MiB.
	BlockCacheSize int64
	// ValueThreshold is the value size from which Badger stores values in the
	// value log rather than the LSM tree. Default 1 KiB, which sends every
	// chunk but the tiniest to the value log.
	ValueThreshold int64
	// BadgerDefaults ignores the tuning above and opens Badger with its own
	// defaults; it exists to measure the tuning.
	BadgerDefaults bool
	// MinFreeDisk is the free space the filesystem under Dir must keep:
	// a chunk write that would leave less fails with ErrFull (diskfree.go).
	// Badger writes through memory maps, where a full disk is a SIGBUS that
	// kills the process, so the store stops short of it. Default
	// 2×MemTableSize + 16 MiB (room for memtable flushes and compactions);
	// negative disables the check. Open also refuses (ErrFull) a disk with
	// less than MemTableSize free, unless this is negative.
	MinFreeDisk int64
	// MaxDiskBytes bounds the store directory's files, so that a burst of
	// uploads evicting as fast as it writes cannot take the disk far past
	// MaxBytes while value-log GC catches up (diskbound.go). It counts the
	// apparent size of every file at the top of Dir except Badger's fixed
	// files (*.mem, DISCARD, KEYREGISTRY, MANIFEST, LOCK); subdirectories are
	// not counted. Evictions kick GC as they go, and a Put whose bytes would
	// pass the bound waits up to DiskWait for GC, then fails with
	// ErrReclaiming. When GC finds nothing to reclaim (small entries take
	// more disk than their bytes, so their live data alone can fill the
	// bound), such a Put evicts least recently used entries first.
	// Default, with MaxBytes: 1.25×MaxBytes, but at least MaxBytes +
	// 6×ValueLogFileSize (the value-log files a store of that size needs
	// besides its live bytes). Ignored without MaxBytes or with
	// a negative GCInterval; negative disables the bound.
	MaxDiskBytes int64
	// DiskWait is how long a Put past MaxDiskBytes waits for GC before it
	// fails with ErrReclaiming. Default 1s; negative fails at once.
	DiskWait time.Duration
	// HotCacheBytes bounds the memory holding the verified bytes of small
	// (at most 64 KiB), recently read blobs, so that a GET of a hot small
	// entry reads only its metadata from Badger (hotcache.go). Default
	// 64 MiB; negative disables the cache.
	HotCacheBytes int64
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ChunkSize <= 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.GCInterval == 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.GCDiscardRatio <= 0 || c.GCDiscardRatio >= 1 {
		c.GCDiscardRatio = DefaultGCDiscardRatio
	}
	if c.MemTableSize <= 0 {
		c.MemTableSize = DefaultMemTableSize
	}
	if c.ValueLogFileSize <= 0 {
		c.ValueLogFileSize = DefaultValueLogFileSize
		if c.MaxBytes > 0 {
			c.ValueLogFileSize = min(max(c.MaxBytes/32, 2*int64(c.ChunkSize), 1<<20), DefaultValueLogFileSize)
		}
	}
	switch {
	case c.MaxBytes <= 0 || c.GCInterval < 0 || c.MaxDiskBytes < 0:
		c.MaxDiskBytes = 0
	case c.MaxDiskBytes == 0:
		c.MaxDiskBytes = max(c.MaxBytes+c.MaxBytes/4, c.MaxBytes+6*c.ValueLogFileSize)
	}
	if c.DiskWait == 0 {
		c.DiskWait = DefaultDiskWait
	}
	if c.BlockCacheSize <= 0 {
		c.BlockCacheSize = DefaultBlockCacheSize
	}
	if c.ValueThreshold <= 0 {
		c.ValueThreshold = DefaultValueThreshold
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = DefaultExpiryInterval
	}
	if c.ExpiryBatch <= 0 {
		c.ExpiryBatch = DefaultExpiryBatch
	}
	if c.HotCacheBytes == 0 {
		c.HotCacheBytes = DefaultHotCacheBytes
	}
	if c.MinFreeDisk == 0 {
		c.MinFreeDisk = 2*c.MemTableSize + 16<<20
	}
	return c
}

func (c Config) badgerOptions() badger.Options {
	opts := badger.DefaultOptions(c.Dir).
		WithLogger(badgerLogger{c.Logger}).
		WithSyncWrites(false) // the store syncs explicitly, see Config.SyncWrites
	if c.BadgerDefaults {
		return opts
	}
	return opts.
		WithValueThreshold(c.ValueThreshold).
		WithMemTableSize(c.MemTableSize).
		WithNumMemtables(2).
		// One L0 table is enough to trigger compaction into the lower
		// levels, which is where Badger learns which value-log bytes are
		// garbage (see maintain).
		WithNumLevelZeroTables(1).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithValueLogFileSize(c.ValueLogFileSize).
		WithBlockCacheSize(c.BlockCacheSize).
		WithCompression(options.None).
		WithMetricsEnabled(false).
		WithNumGoroutines(2)
}
