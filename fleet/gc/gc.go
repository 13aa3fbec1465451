// Package gc removes from the shared tier (the S3 bucket of store/s3)
// what no replica has used for a given age, and the debris that crashed or
// finished processes leave: it is `cachesvc gc`. It is safe to run while
// replicas serve, and two runs at once only do the same work twice.
//
// # Mark and sweep
//
// A run, at time T with age A and grace G:
//
//  1. Reads the access logs (access/<replica>/…, registry.AccessLog)
//     written since T-A: the entries replicas served, from their hot tiers
//     or from the bucket. Older access logs are deleted.
//  2. Lists the entry records (entries/<ns>/<key>) page by page. An entry
//     is used when its record was written since T-A (the record's
//     LastModified: records are immutable, so that is when the entry was
//     stored) or an access log names it. Unused records are deleted; the
//     record of each used one is read for its blob digest, which is added
//     to the referenced set.
//  3. Lists the blobs (blobs/<sha256>) and deletes those that no remaining
//     record references and whose LastModified is before T-G. The grace
//     protects a Put in flight: its blob is complete before its record is
//     written, and for that moment nothing references it.
//  4. Deletes temporary uploads (uploads/…) and aborts incomplete multipart
//     uploads begun before T-G, deletes lease objects (leases/…) expired
//     before T-G, and deletes heartbeat objects of replicas (replicas/…)
//     silent since before T-registry.DefaultGoneAfter.
//  5. Deletes replicas' parts of run manifests (runs/…) and signature memo
//     objects (memo/…) not written since T-A: a live run rewrites its parts
//     every few seconds, and a live memo object is written again on its
//     next miss (one plugin call).
//
// Any error while reading access logs or entry records, or while deleting
// records, ends the run before step 3: a blob is never deleted on the
// strength of an incomplete mark.
//
// # Races that remain
//
// Nothing gc does can make a replica serve wrong bytes (every read is
// verified against its digest); what it can do is make an entry missing,
// which costs one recompile:
//
//   - Dedup reuse: a Put whose body matches a blob that exists skips the
//     upload and writes only its record. If that blob was unreferenced,
//     older than the grace, and the record is written after step 2 passed
//     its key, step 3 deletes the blob under the new record. The next read
//     of that entry finds the blob missing, quarantines the record (store/s3
//     counts an integrity failure) and answers a miss; the client compiles
//     again and its Put stores the blob anew.
//   - Re-put of a dying entry: a Put of a key whose unused record step 2 is
//     about to delete answers "exists" and uploads nothing; the record is
//     then deleted, and the next read misses.
//   - Unflushed use: a replica flushes its access log every few minutes
//     (registry.DefaultAccessInterval), so an entry idle for the whole age
//     and used only in the last minutes before a run looks unused.
//   - A multipart upload slower than the grace is aborted (its Put fails
//     and is retried by the client): keep the grace above the longest
//     upload.
//
// # Memory
//
// Listings are streamed and records are read in pages, so memory does not
// grow with the number of unused entries. Two sets grow with the bucket: the
// referenced blobs, a sorted slice holding the first 8 bytes of each kept
// entry's digest (8 B per kept entry: 10 M entries cost 80 MB, up to twice
// that while the slice grows; a map of the 32-byte digests would cost
// 0.4 to 0.8 GB), and the accessed entries, a map of 8-byte hashes of
// namespace and key (20 to 40 B per distinct entry accessed within the age).
// Truncation can only make two values collide, which keeps a blob or an
// entry that could have gone (odds about n/2^64), never the reverse.
package gc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/store"
)

// Defaults for the zero values of Config fields.
const (
	// DefaultOlderThan is the default Config.OlderThan: 30 days.
	DefaultOlderThan = 720 * time.Hour
	// DefaultGrace is the default Config.Grace.
	DefaultGrace = time.Hour
	// DefaultLeaseTTLBound is the default Config.LeaseTTLBound.
	DefaultLeaseTTLBound = 24 * time.Hour
)

// Object name prefixes under the fleet's prefix that gc sweeps, beside
// registry.ReplicasDir and registry.AccessDir.
const (
	EntriesDir = "entries/"
	BlobsDir   = "blobs/"
	UploadsDir = "uploads/"
	LeasesDir  = "leases/"
	RunsDir    = "runs/"
	MemoDir    = "memo/"
)

// Phases of a run, in order, as reported to Config.Progress.
const (
	PhaseAccess    = "access logs"
	PhaseEntries   = "entries"
	PhaseBlobs     = "blobs"
	PhaseUploads   = "uploads"
	PhaseMultipart = "multipart uploads"
	PhaseLeases    = "leases"
	PhaseReplicas  = "replicas"
	PhaseRuns      = "run manifests"
	PhaseMemo      = "signature memo"
)

// Config configures a run. Bucket is required; the zero value of every other
// field means its default.
type Config struct {
	// Bucket is the shared tier (registry.Dial with the replicas' s3.Config).
	Bucket *registry.Bucket
	// OlderThan is the age: entries neither stored nor served within it
	// are removed. Default 720 h.
	OlderThan time.Duration
	// Grace protects objects younger than it that nothing names yet: blobs
	// of Puts in flight, temporary and multipart uploads, and leases
	// expired less than it ago. Default 1 h.
	Grace time.Duration
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
	// LeaseTTLBound is the longest lease a replica grants: a lease object
	// whose expiry cannot be read counts as expiring that long after it was
	// written. Default 24 h.
	LeaseTTLBound time.Duration
	// Now is the run's clock (tests back-date with it); nil means time.Now.
	Now func() time.Time
	// Progress, when set, is called from the run's goroutine as objects
	// are examined (every few hundred, and at each phase's end).
	Progress func(Progress)
	// Logger receives the run's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Progress is where a run is.
type Progress struct {
	// Phase is one of the Phase constants.
	Phase string
	// Examined and Removed count the phase's objects so far (Removed
	// counts what would be removed in a dry run).
	Examined, Removed int64
}

// Report is what a run found and did. In a dry run the removed counts are
// what would have been removed.
//
// Its JSON form (cachesvc gc --json) has snake_case names, as every other
// JSON the project prints, and the duration in nanoseconds.
type Report struct {
	DryRun   bool          `json:"dry_run"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`

	EntriesKept    int64 `json:"entries_kept"`
	EntriesRemoved int64 `json:"entries_removed"`
	// EntriesAccessed are kept entries older than the age that an access
	// log names (included in EntriesKept).
	EntriesAccessed int64 `json:"entries_accessed"`
	// EntriesUnreadable are records that could not be decoded: kept, and
	// their blobs unprotected (store/s3 cannot serve them either).
	EntriesUnreadable int64 `json:"entries_unreadable"`

	BlobsKept    int64 `json:"blobs_kept"`
	BlobsRemoved int64 `json:"blobs_removed"`
	BytesKept    int64 `json:"bytes_kept"`
	BytesRemoved int64 `json:"bytes_removed"`
	// BlobsYoung are unreferenced blobs kept for the grace (included in
	// BlobsKept).
	BlobsYoung int64 `json:"blobs_young"`

	AccessLogsRead    int64 `json:"access_logs_read"`
	AccessLogsRemoved int64 `json:"access_logs_removed"`
	UploadsRemoved    int64 `json:"uploads_removed"`
	MultipartAborted  int64 `json:"multipart_aborted"`
	LeasesRemoved     int64 `json:"leases_removed"`
	ReplicasRemoved   int64 `json:"replicas_removed"`
	// RunPartsRemoved are replicas' parts of run manifests (runs/) not
	// rewritten within the age; MemoRemoved are signature memo objects
	// (memo/) not written within it (an old plugin version's, mostly: a
	// live one is written again on its next miss, at one plugin call).
	RunPartsRemoved int64 `json:"run_parts_removed"`
	MemoRemoved     int64 `json:"memo_removed"`
}

// Run collects garbage once, as the package doc describes, and returns what
// it did. On error the report holds the counts up to the failure.
//
// # Errors
//
//   - store.ErrInvalid: no bucket, or a negative age or grace.
//   - a listing's, read's or delete's error, wrapped with the object.
//   - ctx's error.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Bucket == nil {
		return Report{}, fmt.Errorf("gc: %w: no bucket", store.ErrInvalid)
	}
	if cfg.OlderThan < 0 || cfg.Grace < 0 || cfg.LeaseTTLBound < 0 {
		return Report{}, fmt.Errorf("gc: %w: negative age, grace or lease bound", store.ErrInvalid)
	}
	if cfg.OlderThan == 0 {
		cfg.OlderThan = DefaultOlderThan
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.LeaseTTLBound == 0 {
		cfg.LeaseTTLBound = DefaultLeaseTTLBound
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &run{cfg: cfg, b: cfg.Bucket, log: cfg.Logger, start: cfg.Now()}
	g.rep.DryRun, g.rep.Started = cfg.DryRun, g.start.UTC()
	err := g.run(ctx)
	g.rep.Duration = cfg.Now().Sub(g.start)
	return g.rep, err
}

// run is one collection's state.
type run struct {
	cfg   Config
	b     *registry.Bucket
	log   *slog.Logger
	start time.Time
	rep   Report
}

func (g *run) run(ctx context.Context) error {
	cutoff := g.start.Add(-g.cfg.OlderThan)
	grace := g.start.Add(-g.cfg.Grace)
	accessed, err := g.readAccess(ctx, cutoff)
	if err != nil {
		return err
	}
	refs, err := g.markEntries(ctx, cutoff, accessed)
	if err != nil {
		return err
	}
	accessed = nil // free it before the blob listing
	if err := g.sweepBlobs(ctx, refs, grace); err != nil {
		return err
	}
	if err := g.sweepUploads(ctx, grace); err != nil {
		return err
	}
	if err := g.abortMultipart(ctx, grace); err != nil {
		return err
	}
	if err := g.sweepLeases(ctx, grace); err != nil {
		return err
	}
	if err := g.sweepOlder(ctx, PhaseRuns, RunsDir, cutoff, &g.rep.RunPartsRemoved); err != nil {
		return err
	}
	if err := g.sweepOlder(ctx, PhaseMemo, MemoDir, cutoff, &g.rep.MemoRemoved); err != nil {
		return err
	}
	return g.sweepReplicas(ctx, g.start.Add(-registry.DefaultGoneAfter))
}
