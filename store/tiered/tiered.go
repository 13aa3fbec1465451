// Package tiered composes a hot tier (each replica's Badger) in front of a
// shared tier (the fleet's S3 bucket) into one store.Store: perkeep's
// proxycache shape, a wrapper satisfying the interface it wraps.
//
// # Reads
//
// Get serves the hot tier when it has the entry. On a hot miss it fetches
// the whole entry from the shared tier once per key per process, through
// the key's spool: an unlinked file under Config.SpoolDir that one
// goroutine fills from the shared tier as fast as the tier sends. Every Get
// of the key while the spool lives, the first included, reads the file
// behind that goroutine, so no reader waits for another, for the hot tier,
// or for a slow client; a Get that reads slowly only falls behind. Once the
// download ends, verified, the hot tier is filled from the spool in the
// background (at most Config.MaxFills at a time, each within
// Config.FillTimeout), and the spool is dropped once the fill has committed
// and its last reader is closed; Gets arriving meanwhile still read the
// spool. The download first checks the hot tier again (a fill may have
// committed just after this Get missed).
//
// Integrity: the shared tier's reader withholds an entry's last buffer
// until its SHA-256 matches, so neither the spool nor any reader ever holds
// a complete entry that fails its digest; the hot tier's Put is given the
// size and digest and checks them again, so it never keeps bad bytes. A
// ranged Get on a hot miss waits for the verified download and serves the
// range from the spool. When the hot tier cannot keep an entry (too large,
// full) the fill fails and is counted; the next Get fetches it again.
//
// Bounds: spools hold at most Config.MaxSpoolBytes in all. A hot miss whose
// entry does not fit the remaining budget is served from the shared tier
// directly, without a spool or a fill, and counted (Stats.FillsSkipped,
// EventFillSkipped); concurrent Gets of that key then read the shared tier
// each, so the budget should hold a few of the largest entries.
//
// # Writes
//
// In ModeThrough (the default) Put streams the body to the shared tier and,
// through a tee, to the hot tier, whose Put is held before its end until
// the shared tier's Put has returned: the hot tier commits only entries the
// shared tier has (so replicas never disagree), and Put returns success
// only once the shared tier has the entry, durably. With the shared tier
// down, Put fails with an error wrapping store.ErrUnavailable and reads of
// hot entries go on working.
//
// In ModeBehind, Put returns once the entry is in the hot tier and in the
// upload queue (queue.go): see Config.QueueDir.
//
// # Observing
//
// Stats counts what the tiers did; Config.Observe receives one Event per
// shared-tier request, fill and queue decision, with its duration, for
// latency histograms; SharedState and Ready report the shared tier's
// health without a request. While SharedState says the shared tier is
// unreachable, a request's call to it that gets no answer within a few
// seconds fails with store.ErrUnavailable (failfast.go).
package tiered

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Mode is a write mode.
type Mode string

// Write modes.
const (
	// ModeThrough acknowledges a Put once the shared tier has it.
	ModeThrough Mode = "through"
	// ModeBehind acknowledges a Put once the hot tier and the persistent
	// upload queue have it; the queue uploads it to the shared tier later.
	ModeBehind Mode = "behind"
)

// Defaults of the zero Config fields.
const (
	// DefaultMaxSpoolBytes is the default Config.MaxSpoolBytes.
	DefaultMaxSpoolBytes = 4 << 30
	// DefaultMaxFills is the default Config.MaxFills.
	DefaultMaxFills = 2
	// DefaultFillTimeout is the default Config.FillTimeout.
	DefaultFillTimeout = 10 * time.Minute
	// DefaultProbeInterval is the default Config.ProbeInterval.
	DefaultProbeInterval = 10 * time.Second
	// DefaultMaxQueueEntries is the default Config.MaxQueueEntries.
	DefaultMaxQueueEntries = 10000
	// DefaultMaxQueueBytes is the default Config.MaxQueueBytes.
	DefaultMaxQueueBytes = 8 << 30
)

// Config configures a tiered store. The zero value of every optional field
// means its default.
type Config struct {
	// Hot is the local tier (Badger), consulted first and filled on reads.
	// Required; the tiered store closes it.
	Hot store.Store
	// Shared is the durable tier every replica uses (S3). Required; the
	// tiered store closes it. Its reads should time out when stalled
	// (s3.Config.ReadTimeout): a download waits for them.
	Shared store.Store
	// Mode is the write mode; "" means ModeThrough.
	Mode Mode

	// SpoolDir is where hot misses are spooled (a directory on local disk,
	// e.g. under the data directory); "" means os.TempDir(). Spool files
	// are unlinked at creation, so nothing is left there after a crash.
	SpoolDir string
	// MaxSpoolBytes bounds the bytes of all spools; default 4 GiB. A hot
	// miss that does not fit is served without a spool or fill (see the
	// package doc).
	MaxSpoolBytes int64
	// MaxFills bounds the concurrent fills of the hot tier from spools;
	// default 2.
	MaxFills int
	// FillTimeout bounds one fill of the hot tier; default 10 minutes. A
	// fill past it is abandoned and counted in Stats.FillFailures.
	FillTimeout time.Duration

	// QueueDir is the upload queue's directory (ModeBehind; required
	// there): one body file and one record file per queued entry. It must
	// persist with the hot tier (e.g. beside it in the data directory).
	QueueDir string
	// MaxQueueEntries bounds the upload queue's entries; default 10,000. A
	// Put that would exceed it fails with store.ErrQueueFull and stores
	// nothing (in either tier).
	MaxQueueEntries int
	// MaxQueueBytes bounds the upload queue's bytes; default 8 GiB. A Put
	// whose declared size, or whose body as it streams, would exceed it
	// fails with store.ErrQueueFull and stores nothing.
	MaxQueueBytes int64
	// Uploaders is the number of concurrent uploads from the queue;
	// default 2.
	Uploaders int

	// ProbeInterval is how often the shared tier is probed (one Stat of a
	// key no entry has) when no request got an answer within it, for
	// SharedState; default 10s, negative never.
	ProbeInterval time.Duration
	// Observe, when set, receives an Event for every shared-tier request,
	// fill and queue decision. It is called synchronously on the request
	// path and must be fast and not block.
	Observe func(Event)
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Stats counts what the tiers did, for metrics. Fields are cumulative
// except the Queue fields, which are the queue's state now.
type Stats struct {
	// HotHits are Gets served by the hot tier.
	HotHits int64
	// SharedFetches are entries fetched from the shared tier (one per
	// spool, however many Gets it served, plus Gets served directly).
	SharedFetches int64
	// SharedBytesRead are the bytes of entries read from the shared tier.
	SharedBytesRead int64
	// SharedErrors are shared-tier requests that failed (misses excluded).
	SharedErrors int64
	// Collapsed are Gets that joined another Get's spool.
	Collapsed int64
	// Misses are Gets that neither tier could serve (store.ErrNotFound).
	Misses int64
	// FillFailures are fetched entries the hot tier did not keep (corrupt,
	// too large, full, timed out, hot tier errors).
	FillFailures int64
	// FillsSkipped are hot misses served without a spool or a fill because
	// the spool budget was spent.
	FillsSkipped int64
	// HotPutFailures are Puts stored in the shared tier but not the hot one.
	HotPutFailures int64

	// Uploaded are queued entries stored in the shared tier (ModeBehind).
	Uploaded int64
	// UploadRetries are failed upload attempts that will be retried.
	UploadRetries int64
	// UploadsDropped are queued entries given up on (see
	// EventUploadDropped).
	UploadsDropped int64
	// QueueFull are Puts refused with store.ErrQueueFull.
	QueueFull int64
	// QueueEntries and QueueBytes are what the upload queue holds now.
	QueueEntries int64
	QueueBytes   int64
	// OldestQueued is when the oldest queued entry was queued; zero when the
	// queue is empty.
	OldestQueued time.Time
}

type counters struct {
	hotHits, sharedFetches, sharedBytesRead, sharedErrors, collapsed, misses atomic.Int64
	fillFailures, fillsSkipped, hotPutFailures                               atomic.Int64
	uploaded, uploadRetries, uploadsDropped, queueFull                       atomic.Int64
}

// Store is a store.Store of two tiers. It is safe for concurrent use.
type Store struct {
	cfg         Config
	hot, shared store.Store
	log         *slog.Logger
	n           counters
	health      health
	q           *queue // nil in ModeThrough
	// queueDir is the upload queue's directory as opened, to tell at
	// Close whether it is still the one holding the queued files.
	queueDir os.FileInfo

	ctx    context.Context // ends at Close: downloads, fills, probes, uploads
	cancel context.CancelFunc
	wg     sync.WaitGroup
	fills  chan struct{} // a slot per running fill

	mu         sync.Mutex
	spools     map[string]*spool // by ns/key, until the fill has committed
	spoolBytes int64
	idle       []*os.File // spool files kept for reuse (spool.go)
	closing    bool       // CloseShared has begun
	hotClosed  bool       // Close has closed the hot tier
}

var _ store.Store = (*Store)(nil)

// openReporter is a shared tier that can say whether it could be reached
// when it was opened (s3.Store).
type openReporter interface{ OpenErr() error }

// initialSharedState is the shared tier's state before any request: what
// its Open saw where it can say (an unreachable tier is probed at once),
// else reachable, since it was opened.
func initialSharedState(shared store.Store, now time.Time) SharedState {
	if o, ok := shared.(openReporter); ok {
		if err := o.OpenErr(); err != nil {
			return SharedState{LastError: err.Error(), LastErrorAt: now}
		}
	}
	return SharedState{Reachable: true, LastSuccess: now}
}

// New returns a tiered store over cfg.Hot and cfg.Shared. In ModeBehind it
// opens the upload queue in cfg.QueueDir and starts uploading what an
// earlier process left queued.
func New(cfg Config) (*Store, error) {
	if cfg.Hot == nil || cfg.Shared == nil {
		return nil, fmt.Errorf("new tiered store: %w: hot and shared tiers are required", store.ErrInvalid)
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeThrough
	case ModeThrough, ModeBehind:
	default:
		return nil, fmt.Errorf("new tiered store: %w: write mode %q (want %q or %q)", store.ErrInvalid, cfg.Mode, ModeThrough, ModeBehind)
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = os.TempDir()
	}
	if err := os.MkdirAll(cfg.SpoolDir, 0o755); err != nil {
		return nil, fmt.Errorf("new tiered store: spool directory: %w", err)
	}
	setDefault(&cfg.MaxSpoolBytes, DefaultMaxSpoolBytes)
	setDefault(&cfg.MaxFills, DefaultMaxFills)
	setDefault(&cfg.FillTimeout, DefaultFillTimeout)
	setDefault(&cfg.ProbeInterval, DefaultProbeInterval)
	setDefault(&cfg.MaxQueueEntries, DefaultMaxQueueEntries)
	setDefault(&cfg.MaxQueueBytes, DefaultMaxQueueBytes)
	setDefault(&cfg.Uploaders, 2)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		cfg: cfg, hot: cfg.Hot, shared: cfg.Shared, log: cfg.Logger, ctx: ctx, cancel: cancel,
		fills: make(chan struct{}, cfg.MaxFills), spools: make(map[string]*spool),
	}
	s.health.st = initialSharedState(cfg.Shared, time.Now())
	s.health.recheck = make(chan struct{}, 1)
	if cfg.Mode == ModeBehind {
		q, err := openQueue(s, cfg.QueueDir)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("new tiered store: %w", err)
		}
		s.q = q
		s.queueDir, _ = os.Stat(cfg.QueueDir)
		if n, b, oldest := q.depth(); n > 0 {
			// Left by the last process (stopped, or killed) before they
			// reached the bucket: say that they are not lost.
			s.log.Info("upload queue resumed: entries the last process left are uploaded now",
				"dir", cfg.QueueDir, "entries", n, "bytes", b, "oldest", oldest.UTC().Format(time.RFC3339))
		}
		q.start()
	}
	if cfg.ProbeInterval > 0 {
		s.wg.Add(1)
		go s.probeLoop()
	}
	return s, nil
}

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Stats returns the counters and the queue's state.
func (s *Store) Stats() Stats {
	st := Stats{
		HotHits: s.n.hotHits.Load(), SharedFetches: s.n.sharedFetches.Load(), SharedBytesRead: s.n.sharedBytesRead.Load(),
		SharedErrors: s.n.sharedErrors.Load(), Collapsed: s.n.collapsed.Load(), Misses: s.n.misses.Load(),
		FillFailures: s.n.fillFailures.Load(), FillsSkipped: s.n.fillsSkipped.Load(), HotPutFailures: s.n.hotPutFailures.Load(),
		Uploaded: s.n.uploaded.Load(), UploadRetries: s.n.uploadRetries.Load(), UploadsDropped: s.n.uploadsDropped.Load(),
		QueueFull: s.n.queueFull.Load(),
	}
	if s.q != nil {
		st.QueueEntries, st.QueueBytes, st.OldestQueued = s.q.depth()
	}
	return st
}

// Stat returns the hot tier's metadata, or on a hot miss the upload
// queue's (ModeBehind) or the shared tier's, without filling the hot tier.
func (s *Store) Stat(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	m, err := s.hot.Stat(ctx, ns, key)
	if err == nil || !errors.Is(err, store.ErrNotFound) || s.quarantined(ns, key) {
		return m, err
	}
	if s.q != nil {
		if m, ok := s.q.stat(ns, key); ok {
			return m, nil
		}
	}
	g := s.guard(ctx) // failfast.go
	m, err = s.shared.Stat(g, ns, key)
	err = g.disarm(err)
	g.release()
	s.observe(err)
	return m, err
}

// Delete removes the entry from both tiers. A miss (in both) returns
// store.ErrNotFound.
func (s *Store) Delete(ctx context.Context, ns string, key store.Key) error {
	queued := false
	if s.q != nil {
		queued = s.q.remove(ns, key)
	}
	g := s.guard(ctx)
	serr := g.disarm(s.shared.Delete(g, ns, key))
	g.release()
	if queued && errors.Is(serr, store.ErrNotFound) {
		serr = nil
	}
	if serr != nil && !errors.Is(serr, store.ErrNotFound) {
		return fmt.Errorf("delete entry %s/%s: shared tier: %w", ns, key, serr)
	}
	herr := s.hot.Delete(ctx, ns, key)
	if herr != nil && !errors.Is(herr, store.ErrNotFound) {
		return fmt.Errorf("delete entry %s/%s: hot tier: %w", ns, key, herr)
	}
	if serr != nil && herr != nil {
		return serr
	}
	return nil
}

// Walk walks the shared tier, which holds every entry (the hot tier holds
// those this replica used lately). On S3 that is a request per entry.
func (s *Store) Walk(ctx context.Context, ns string, fn func(store.Meta) bool) error {
	g := s.guard(ctx) // failfast.go: an entry listing must not park on a hung tier
	defer g.release()
	return g.disarm(s.shared.Walk(g, ns, g.walkFn(fn)))
}

// WalkAfter is Walk starting after the entry (afterNS, afterKey), which need
// not exist: through the shared tier's WalkAfter (store.WalkAfter), so a
// paged listing does not read every record before its page again.
func (s *Store) WalkAfter(ctx context.Context, ns, afterNS string, afterKey store.Key, fn func(store.Meta) bool) error {
	g := s.guard(ctx)
	defer g.release()
	return g.disarm(store.WalkAfter(g, s.shared, ns, afterNS, afterKey, g.walkFn(fn)))
}

// Usage returns the shared tier's entry, blob and byte counts (Tier
// wire.StoreTierShared, no limit) with the hot tier's disk use, evictions
// and namespaces, and both tiers' integrity failures; Hot is the hot tier's
// own usage against its limit. (Before, the shared tier's bytes came with
// the hot tier's limit, and stats showed a fleet's whole bucket as a share
// of one replica's --max-size.)
func (s *Store) Usage() store.Usage {
	h, sh := s.hot.Usage(), s.shared.Usage()
	hot := h
	hot.Tier, hot.Namespaces, hot.Hot = wire.StoreTierHot, nil, nil
	sh.Tier, sh.Hot = wire.StoreTierShared, &hot
	sh.MaxBytes = 0
	sh.DiskBytes = h.DiskBytes
	sh.Evictions = h.Evictions
	sh.IntegrityFailures += h.IntegrityFailures
	sh.Quarantined, sh.QuarantinesReported, sh.QuarantinesAdmin = h.Quarantined, h.QuarantinesReported, h.QuarantinesAdmin
	sh.Namespaces = h.Namespaces // quotas bound the hot tier, per replica
	return sh
}

// NamespaceUsage returns the hot tier's usage of namespace ns against its
// quota: quotas bound each replica's hot tier (the shared tier is pruned by
// `cachesvc gc`).
func (s *Store) NamespaceUsage(ns string) store.NamespaceUsage {
	if h, ok := s.hot.(interface {
		NamespaceUsage(string) store.NamespaceUsage
	}); ok {
		return h.NamespaceUsage(ns)
	}
	return store.NamespaceUsage{Namespace: ns}
}

// queueDirErr reports whether the upload queue's directory is gone: removed,
// or removed and made again (its files went with the old one), as when the
// data directory is deleted under a running server.
func (s *Store) queueDirErr() error {
	fi, err := os.Stat(s.cfg.QueueDir)
	switch {
	case err != nil:
		return err
	case s.queueDir != nil && !os.SameFile(fi, s.queueDir):
		return fmt.Errorf("%s was removed and made again: this is not the directory the queue opened", s.cfg.QueueDir)
	}
	return nil
}

// Close stops the downloads, fills, probes and uploads in flight (waiting
// for them to end; queued entries stay queued on disk for the next
// process), then closes both tiers (CloseShared, then the hot tier).
// Readers still open fail.
func (s *Store) Close() error {
	serr := s.CloseShared()
	s.mu.Lock()
	done := s.hotClosed
	s.hotClosed = true
	s.mu.Unlock()
	if done {
		return serr
	}
	return errors.Join(serr, s.hot.Close())
}

// CloseShared is Close without the hot tier: it stops the downloads,
// fills, probes and uploads in flight, waits for them to end, logs what
// the upload queue still holds (how many entries and bytes, and the
// namespace/key of the oldest few: WARN while the queue's directory is
// there for the next start, ERROR when it is gone and they are lost), and
// closes the shared tier. The hot tier stays open, for Close or the
// caller to close. A Badger hot tier whose directory is gone or not
// writable never returns from its Close (see store.Badger.DirErr), so
// serve then calls CloseShared alone: the operator still learns which
// acknowledged entries never reached the shared tier. Calls after the
// first return nil.
func (s *Store) CloseShared() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.mu.Unlock()
	s.cancel()
	// The shared tier first: its readers fail at their next buffer, so a
	// download in flight ends without reading the rest of its entry.
	serr := s.shared.Close()
	s.wg.Wait()
	var qerr error
	if s.q != nil {
		if n, b, oldest := s.q.depth(); n > 0 {
			attrs := []any{"dir", s.cfg.QueueDir, "entries", n, "bytes", b, "oldest", oldest.UTC().Format(time.RFC3339),
				"oldest_entries", s.q.oldestNames(closeNamed)}
			if n := s.q.spell.pending(); n > 0 {
				// Still failing: how long it has been trying.
				attrs = append(attrs, "retries", n)
			}
			if err := s.queueDirErr(); err != nil {
				// The data directory was wiped under the process: no
				// restart will find them, and the log must not say so.
				s.log.Error("upload queue not empty at shutdown, and its directory is gone: these entries were on this replica's disk only, never reached the shared tier and are lost",
					append(attrs, "err", err)...)
			} else {
				// Kept on this replica's disk only: the operator must
				// know not to wipe it (a pod's emptyDir, a reimaged
				// host) before the next start uploads them.
				s.log.Warn("upload queue not empty at shutdown: these entries are on this replica's disk only, and are uploaded when it starts again on the same data directory", attrs...)
			}
		}
		qerr = s.q.close()
	}
	s.mu.Lock()
	for _, f := range s.idle {
		_ = f.Close()
	}
	s.idle = nil
	s.mu.Unlock()
	return errors.Join(qerr, serr)
}

// oldestNames returns "namespace/key" of the n oldest queued entries,
// oldest first.
func (q *queue) oldestNames(n int) []string {
	q.mu.Lock()
	items := make([]*qitem, 0, len(q.items))
	for _, it := range q.items {
		items = append(items, it)
	}
	q.mu.Unlock()
	slices.SortFunc(items, func(a, b *qitem) int { return cmp.Compare(a.rec.Seq, b.rec.Seq) })
	names := make([]string, 0, min(n, len(items)))
	for _, it := range items[:min(n, len(items))] {
		names = append(names, it.rec.Namespace+"/"+it.rec.Key)
	}
	return names
}

// closeNamed is how many queued entries CloseShared's log names, oldest
// first: enough to find them, few enough for one line.
const closeNamed = 5
