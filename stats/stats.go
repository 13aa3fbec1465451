// Package stats counts what the cache does — lookups, hits, misses, bytes,
// writes, evictions and compile seconds saved — per namespace × backend ×
// minute and per run, keeps the recent misses with their explanations, and
// persists all of it in its own small Badger database so that it survives
// restarts.
//
// Recording never blocks on I/O: events go to sharded in-memory maps under a
// short lock; a background loop merges them into the in-memory aggregate and
// flushes that to Badger every FlushInterval and on Close. Cardinality is
// bounded: namespaces and backends beyond their caps are folded into
// "_other", a new run past the cap takes the least recently seen run's
// slot (that run folding into "_other"), top entries and recent misses are
// capped. A namespace is
// tracked only once it holds entries, is configured, or a caller that may
// write there looks it up (AdmitNamespace, RecordWrite, Lookup.Admit): a
// reader's lookups and misses never create one, so readers cannot push the
// real namespaces into "_other".
package stats

import (
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/wire"
)

// Other is the label that namespaces and backends beyond their caps, and
// runs evicted from the full run table (Config.MaxRuns), are folded into.
const Other = "_other"

// UnknownBackend labels lookups whose backend is not known (a GET miss by
// key carries none) or not a valid backend name.
const UnknownBackend = "unknown"

// Config configures Stats. The zero value of every field means its default.
type Config struct {
	// Dir is the Badger directory for the persisted stats, typically
	// <data>/stats. Empty keeps everything in memory (nothing survives a
	// restart); tests and benchmarks use that.
	Dir string
	// FlushInterval is how often the aggregate is written to Badger.
	// Default DefaultFlushInterval. The store series takes its sample at
	// each flush and reads a minute without one as a minute the server
	// was not running: longer than a minute leaves such gaps.
	FlushInterval time.Duration
	// MaxNamespaces and MaxBackends cap the distinct values tracked; the
	// rest are counted under Other. Defaults 64 and 16.
	MaxNamespaces int
	MaxBackends   int
	// MaxRuns caps the run ids counted under their own name (default
	// DefaultMaxRuns). At the cap a new run id takes the slot of the least recently
	// seen run of the namespace holding the most runs, whose counts fold
	// into the run Other (so the runs still add up), with a log line at
	// most once a minute and RunEvictions counting it: the runs in use are
	// always tracked, and a namespace flooding run ids evicts its own.
	MaxRuns int
	// RunTTL is how long after its last activity a run keeps its own
	// name: then its counts fold into the run Other, as an evicted run's
	// do. Default 30 days.
	RunTTL time.Duration
	// MaxEntries caps the entries tracked for "top entries by time saved".
	// Default 2000.
	MaxEntries int
	// MissesPerNamespace caps the recent misses kept per namespace.
	// Default 100.
	MissesPerNamespace int
	// MinuteRetention and HourRetention bound the minute and hourly time
	// series. Defaults 48h and 90 days.
	MinuteRetention time.Duration
	HourRetention   time.Duration
	// MaxUnsavedMinutes bounds the minutes of series held while flushes
	// cannot save them; older ones are dropped (dirguard.go). Default
	// DefaultMaxUnsavedMinutes.
	MaxUnsavedMinutes int
	// Usage, when set, is sampled at each flush for the store's evictions,
	// integrity failures and size, which are kept as a global time series.
	// Its Evictions and IntegrityFailures count since the store opened,
	// which must be no earlier than this Stats' previous Close (a server
	// opens both at start): the first sample counts them whole.
	Usage func() Usage
	// Index bounds the in-memory index of entry components used to explain
	// misses.
	Index explain.IndexConfig
	// Logger receives flush errors. Nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. For tests.
	Now func() time.Time

	coarse bool // Now was nil: the record path reads a clock updated every second
}

// DefaultMaxRuns is the default Config.MaxRuns: the run ids (X-Cachesvc-Run)
// counted under their own name. Past it a new run takes the slot of the
// least recently seen run of the namespace holding the most runs, and that
// run's counts fold into the run Other, so the most recent runs are always
// tracked and the runs' counts still add up.
const DefaultMaxRuns = 500

// DefaultFlushInterval is the default Config.FlushInterval: what a process
// that cannot close its statistics loses at most.
const DefaultFlushInterval = 10 * time.Second

func (c *Config) defaults() {
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.MaxNamespaces <= 0 {
		c.MaxNamespaces = 64
	}
	if c.MaxBackends <= 0 {
		c.MaxBackends = 16
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.RunTTL <= 0 {
		c.RunTTL = 30 * 24 * time.Hour
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 2000
	}
	if c.MissesPerNamespace <= 0 {
		c.MissesPerNamespace = 100
	}
	if c.MinuteRetention <= 0 {
		c.MinuteRetention = 48 * time.Hour
	}
	if c.HourRetention <= 0 {
		c.HourRetention = 90 * 24 * time.Hour
	}
	if c.MaxUnsavedMinutes <= 0 {
		c.MaxUnsavedMinutes = DefaultMaxUnsavedMinutes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
		c.coarse = true
	}
}

const numShards = 16

// Stats records and reports cache statistics. It is safe for concurrent use.
type Stats struct {
	cfg   Config
	db    *badger.DB
	index *explain.Index

	namespaces limiter
	backends   limiter
	runs       *runTable

	shards [numShards]shard
	rr     atomic.Uint32

	agg aggregate // merged state; see aggregate.go

	// clock is the Unix time in seconds, updated every second when the
	// clock is the real one, so that recording does not read the time.
	clock atomic.Int64

	flushMu sync.Mutex // serializes flushes
	closed  atomic.Bool
	stop    chan struct{}
	done    chan struct{}

	// savedRunEvictions is the run evictions on disk; guarded by flushMu.
	savedRunEvictions int64
	// dirBroken is whether the last flush found the directory unwritable
	// (dirguard.go); guarded by flushMu.
	dirBroken bool
	// Minutes trimUnsaved dropped; whether it said so this spell.
	unsavedDropped atomic.Int64
	droppedWarned  bool // guarded by flushMu
}

// Open opens (or creates) the stats database in cfg.Dir, loads the persisted
// totals, runs, top entries and recent misses, and starts the flush loop.
func Open(cfg Config) (*Stats, error) {
	cfg.defaults()
	opts := badger.DefaultOptions(cfg.Dir).
		WithLogger(nil).
		WithMemTableSize(4 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithValueLogFileSize(16 << 20).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(2 << 20).
		WithNumCompactors(2).
		WithValueThreshold(1 << 10)
	if cfg.Dir == "" {
		opts = opts.WithInMemory(true)
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open stats db %s: %w", cfg.Dir, err)
	}
	s := &Stats{
		cfg:        cfg,
		db:         db,
		index:      explain.NewIndex(cfg.Index),
		namespaces: limiter{max: cfg.MaxNamespaces, valid: validNamespace, invalid: Other, keepAdded: true},
		backends:   limiter{max: cfg.MaxBackends, valid: validBackend, invalid: UnknownBackend, keepAdded: true},
		runs:       newRunTable(cfg.MaxRuns),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].reset()
	}
	s.agg.init()
	s.clock.Store(cfg.Now().Unix())
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("load stats from %s: %w", cfg.Dir, err)
	}
	go s.loop()
	return s, nil
}

// Close flushes everything recorded and closes the database. Recording after
// Close is ignored. While the directory cannot be written (DirErr), Close
// saves nothing and does not return once the database holds unsaved
// writes: Badger retries its flush into the directory for good.
func (s *Stats) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.done
	ferr := s.Flush()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close stats db: %w", err)
	}
	return ferr
}

func (s *Stats) loop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			s.clock.Store(now.Unix())
		case <-t.C:
			if err := s.flush(); err != nil {
				s.cfg.Logger.Error("flush stats", "err", err)
			}
		}
	}
}

// now returns the time for recording: the coarse clock (whole seconds,
// updated every second) with the real clock, Config.Now otherwise.
func (s *Stats) now() time.Time {
	if s.cfg.coarse {
		return time.Unix(s.clock.Load(), 0)
	}
	return s.cfg.Now()
}

// Index returns the in-memory index of entry components that explains
// misses. Callers seed it at startup (from store.Walk); RecordWrite and
// ForgetEntry keep it current.
func (s *Stats) Index() *explain.Index { return s.index }

// AdmitNamespace tracks ns in the stats under its own name (up to
// MaxNamespaces; beyond, and for a name that is not a valid namespace, it
// counts under Other). ns holds entries or is configured: the server calls
// it for the default namespace, for namespaces found in the store at start
// and for configured ones; RecordWrite admits its namespace itself, and so
// does RecordLookup with Lookup.Admit (a writer's lookup). It is
// cheap once ns is admitted (one map read), so hot paths may call it.
//
// Admission is persisted (at the next flush, like the counts), so that a
// namespace admitted once keeps its own row after a restart even when it
// has only misses.
func (s *Stats) AdmitNamespace(ns string) {
	s.namespaces.admit(ns)
}

// AdmitBackend makes backend b (a loaded plugin's, a stored entry's) count
// under its own name in lookups that miss, which admit none themselves; an
// invalid b is ignored. Writes and hits admit their entries' backends.
// Like a namespace's, admission is persisted, so that an admitted backend
// with only misses keeps its row after a restart (see load).
func (s *Stats) AdmitBackend(b string) {
	if validBackend(b) {
		s.backends.admit(b)
	}
}

// Lookup is one lookup of an entry, by key or by signature. Values that
// are not valid are counted, never kept: see the fields.
type Lookup struct {
	// Namespace counts under Other unless admitted (AdmitNamespace, or
	// Admit).
	Namespace string
	// Admit admits Namespace first (AdmitNamespace): the caller may write
	// there, as its PUT would admit it, so that a fresh namespace's first
	// misses count under its name. Leave it false for read-only callers:
	// asking for a namespace must not make it one.
	Admit bool
	// Backend is the entry's or the signature's backend; empty or not a
	// valid backend name means UnknownBackend. A miss counts under it only
	// when it is admitted (AdmitBackend, a write, a hit), else Other.
	Backend string
	// Run is the client's run id (X-Cachesvc-Run); empty for none, Other
	// when not a valid run id.
	Run string
	// Key and Name identify the entry for "top entries"; a zero Key skips
	// that. Name is made a valid display name (wire.SanitizeName).
	Key  [32]byte
	Name string
	Hit  bool
	// Bytes is how many entry bytes were sent.
	Bytes int64
	// CompileSeconds is the entry's compile time, credited as saved on a
	// hit, bounded to [0, wire.MaxCompileSeconds].
	CompileSeconds float64
	// Partial means the hit served only part of the entry (a Range request)
	// or only revalidated it (304): it counts as a hit with the Bytes given,
	// but saves no compile.
	Partial bool
	// Waited marks a hit of GET ?wait=, sent after the client's own miss
	// while another client held the compile lease; it also counts in
	// Counters.WaitHits.
	Waited bool
	// WaitSeconds is how long a Waited hit parked for the entry. Its client
	// spent that wall time waiting, so the hit saves CompileSeconds minus
	// it (never below zero): what the client would have spent compiling
	// beyond what it spent waiting. A value that is not a positive number
	// counts as no wait.
	WaitSeconds float64
}

// RecordLookup counts one lookup. It never blocks on I/O. A lookup in a
// namespace not admitted (see AdmitNamespace) counts under Other.
func (s *Stats) RecordLookup(l Lookup) {
	if s.closed.Load() {
		return
	}
	// A reader's lookup does not admit its namespace: asking for a
	// namespace does not make it one (issue 12, bug 9). A writer's does: a
	// sweep's first misses come before its first PUT.
	var ns string
	if l.Admit {
		ns = s.namespaces.admit(l.Namespace)
	} else {
		ns = s.namespaces.labelOf(l.Namespace)
	}
	// Nor does a miss admit its backend: it is what the reader claims
	// (X-Cachesvc-Backend), and made-up ones took every MaxBackends slot
	// from the real ones. A hit's is its entry's, which a writer reported;
	// an empty or invalid one is UnknownBackend either way.
	var be string
	if !l.Hit && validBackend(l.Backend) {
		be = s.backends.labelOf(l.Backend)
	} else {
		be = s.backends.admit(l.Backend)
	}
	now := s.now()
	run := s.runSlot(l.Run, ns, now)
	// Entries stored before the API bounded X-Compile-Seconds keep theirs.
	cs := wire.ClampCompileSeconds(l.CompileSeconds)
	var c Counters
	c.Lookups = 1
	if l.Hit {
		c.Hits = 1
		c.BytesOut = l.Bytes
		if !l.Partial {
			saved := cs
			if l.Waited && l.WaitSeconds > 0 { // false for NaN
				saved = max(cs-l.WaitSeconds, 0)
			}
			c.SavedMicros = micros(saved)
		}
		if l.Waited {
			c.WaitHits = 1
		}
	} else {
		c.Misses = 1
	}
	sh := s.shard(l.Namespace, l.Key)
	sh.mu.Lock()
	sh.addSeries(now.Unix()/60, ns, be, &c)
	if run != nil {
		sh.addRun(run, ns, now, &c)
	}
	if l.Hit && l.Key != ([32]byte{}) {
		sh.addEntry(ns, l.Key, l.Name, be, cs, c.SavedMicros)
	}
	sh.mu.Unlock()
}

// Write is one upload that stored a new entry. Its labels are checked as
// Lookup's are; its namespace is admitted.
type Write struct {
	Namespace      string
	Backend        string
	Run            string
	Key            [32]byte
	Name           string
	Bytes          int64
	CompileSeconds float64
	// Components of the signature that produced the key, for explaining
	// later misses; nil for none.
	Components map[string]string
}

// RecordWrite counts one stored entry, admits its namespace and indexes its
// components. It never blocks on I/O.
func (s *Stats) RecordWrite(w Write) {
	if s.closed.Load() {
		return
	}
	ns := s.namespaces.admit(w.Namespace)
	be := s.backends.admit(w.Backend)
	c := Counters{Writes: 1, BytesIn: w.Bytes}
	now := s.now()
	run := s.runSlot(w.Run, ns, now)
	sh := s.shard(w.Namespace, w.Key)
	sh.mu.Lock()
	sh.addSeries(now.Unix()/60, ns, be, &c)
	if run != nil {
		sh.addRun(run, ns, now, &c)
	}
	sh.mu.Unlock()
	if len(w.Components) > 0 {
		// The index is keyed by the backend itself (not its label, which
		// may be Other) so that Explain finds it.
		s.index.Add(w.Namespace, BackendOrUnknown(w.Backend), hex.EncodeToString(w.Key[:]), wire.SanitizeName(w.Name), now, w.Components)
	}
}

// ForgetEntry drops entry key of (ns, backend) from the index that explains
// misses, after a delete, an eviction or a quarantine, so that no miss is
// explained by an entry that is not served. An empty backend means
// whichever backend it has.
func (s *Stats) ForgetEntry(ns, backend string, key [32]byte) {
	k := hex.EncodeToString(key[:])
	if backend == "" {
		s.index.Forget(ns, k)
		return
	}
	s.index.Remove(ns, BackendOrUnknown(backend), k)
}

// RecordEvictions counts n entries of (ns, backend) that the store removed
// for reason (wire.ReasonSize, ReasonQuota, ReasonIdle or ReasonAge; any
// other counts in Evictions only). Use it when the evicting code knows the
// entries; store-wide evictions sampled through Config.Usage are counted
// separately. Like a lookup, it counts under Other when ns is not admitted.
func (s *Stats) RecordEvictions(ns, backend, reason string, n int64) {
	if s.closed.Load() || n <= 0 {
		return
	}
	c := Counters{Evictions: n}
	if p := c.EvictedBy.Of(reason); p != nil {
		*p = n
	}
	sh := s.shard(ns, [32]byte{})
	sh.mu.Lock()
	sh.addSeries(s.now().Unix()/60, s.namespaces.labelOf(ns), s.backends.admit(backend), &c)
	sh.mu.Unlock()
}

// runSlot returns run's slot (see runTable), nil for none, and Other's
// when it is invalid. A new run takes a slot, evicting the least recently
// seen run when all MaxRuns are in use; ns is the request's namespace
// label, where a new run counts for eviction.
func (s *Stats) runSlot(run, ns string, now time.Time) *runSlot {
	if run == "" {
		return nil
	}
	return s.runs.slot(run, ns, now.Unix())
}
