// Package manifest records, per run, which keys the run looked up and wrote, so
// that a later run (the next arm of a sweep) can warm its caches from the
// first one's manifest.
//
// The recorder is bounded three ways: number of runs, keys per run (further
// keys set Truncated), and keys in total. At the run or total-key bound it
// evicts from the namespace that holds the most (runs, or keys), its least
// recently updated run first: one namespace flooding runs (a reader's
// requests, a sweep of thousands of processes each with its own run id)
// evicts its own runs, not another team's. Runs expire TTL after their last
// update. It lives in memory; with Config.Path set it is loaded from and
// saved to a JSON snapshot file (atomically: temp file, fsync, rename), so a
// graceful restart keeps manifests and a crash loses at most the updates
// since the last Save.
//
// With Config.Shared (fleet/state puts it on the fleet's S3 bucket) each
// replica also flushes its records of every run it saw to the backend, one
// part per replica and run, and Manifest merges the local records with
// every replica's part, so that a sweep whose arms reached different
// replicas sees one manifest. See shared.go.
package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/wire"
)

// Sentinel errors.
var (
	// ErrUnknownRun means no manifest is recorded for the run in the namespace
	// (never seen, expired or evicted).
	ErrUnknownRun = errors.New("unknown run")
	// ErrInvalidRun means the run id does not match RunPattern.
	ErrInvalidRun = errors.New("invalid run id")
	// ErrUnavailable means the Shared backend could not be read and this
	// replica has no record of the run: other replicas may have one.
	ErrUnavailable = errors.New("shared run manifests unavailable")
)

// Defaults used when a Config field is zero.
const (
	DefaultMaxRuns       = 1024
	DefaultMaxKeysPerRun = 50_000
	DefaultMaxTotalKeys  = 2_000_000
	DefaultTTL           = 7 * 24 * time.Hour
	// MaxNameLen bounds a recorded display name; longer names are cut.
	MaxNameLen = 256
)

// RunPattern is what a run id must match.
const RunPattern = `^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$`

var runRE = regexp.MustCompile(RunPattern)

// ValidateRun reports whether run is a valid run id.
func ValidateRun(run string) error {
	if !runRE.MatchString(run) {
		return fmt.Errorf("%w %s: use 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':', '@', '+' or '-', starting with a letter or digit", ErrInvalidRun, wire.Echo(run))
	}
	return nil
}

// Config configures a Recorder. The zero value means defaults, memory only.
type Config struct {
	MaxRuns       int           // DefaultMaxRuns when 0
	MaxKeysPerRun int           // DefaultMaxKeysPerRun when 0
	MaxTotalKeys  int           // DefaultMaxTotalKeys when 0
	TTL           time.Duration // DefaultTTL when 0
	// Path is the snapshot file; "" keeps manifests in memory only.
	Path string
	// Now returns the current time (time.Now when nil).
	Now func() time.Time

	// Shared, when set, makes manifests fleet-wide (see shared.go); nil
	// keeps them on this replica.
	Shared Shared
	// ReplicaID names this replica's parts in Shared; required with it,
	// matching ReplicaPattern, unique in the fleet and stable across
	// restarts.
	ReplicaID string
	// FlushInterval is how often changed runs are flushed to Shared
	// (DefaultFlushInterval when 0).
	FlushInterval time.Duration
	// MaxReplicas bounds the parts one Manifest merges
	// (DefaultMaxReplicas when 0); beyond it the manifest is Truncated.
	MaxReplicas int
	// SharedTimeout bounds one flush of one run, and one Manifest's reads
	// (DefaultSharedTimeout when 0).
	SharedTimeout time.Duration
	// Logger receives shared-backend warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// KeyRecord is the wire type of the same name.
type KeyRecord = wire.KeyRecord

// Manifest is the wire type of the same name.
type Manifest = wire.Manifest

type runID struct{ ns, run string }

type runRec struct {
	created, updated time.Time
	keys             []KeyRecord
	first            []time.Time // first use of keys[i], for merging across replicas
	index            map[cachekey.Key]int
	truncated        bool
	// unshared: changed since the last flush to Shared; flushed: the
	// updated time that flush carried.
	unshared bool
	flushed  time.Time
}

// Recorder is the bounded run recorder. It is safe for concurrent use.
type Recorder struct {
	cfg   Config
	mu    sync.Mutex
	runs  map[runID]*runRec
	total int
	dirty bool

	stop     context.CancelFunc
	flushing sync.WaitGroup
}

// New returns a recorder, loading cfg.Path when it exists. With cfg.Shared
// it starts the goroutine that flushes to it every FlushInterval; Close
// stops it.
func New(cfg Config) (*Recorder, error) {
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = DefaultMaxRuns
	}
	if cfg.MaxKeysPerRun <= 0 {
		cfg.MaxKeysPerRun = DefaultMaxKeysPerRun
	}
	if cfg.MaxTotalKeys <= 0 {
		cfg.MaxTotalKeys = DefaultMaxTotalKeys
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := sharedDefaults(&cfg); err != nil {
		return nil, err
	}
	r := &Recorder{cfg: cfg, runs: make(map[runID]*runRec)}
	if cfg.Path != "" {
		if err := r.load(); err != nil {
			return nil, err
		}
	}
	if cfg.Shared != nil {
		ctx, cancel := context.WithCancel(context.Background())
		r.stop = cancel
		r.flushing.Add(1)
		go r.flushEvery(ctx)
	}
	return r, nil
}

// RecordLookup records that run looked up key in ns.
func (r *Recorder) RecordLookup(ns, run string, key cachekey.Key) { r.record(ns, run, key, "", false) }

// RecordWrite records that run wrote key in ns, with its display name.
func (r *Recorder) RecordWrite(ns, run string, key cachekey.Key, name string) {
	r.record(ns, run, key, name, true)
}

func (r *Recorder) record(ns, run string, key cachekey.Key, name string, write bool) {
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
	}
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	id := runID{ns, run}
	rr := r.runs[id]
	if rr != nil && now.Sub(rr.updated) > r.cfg.TTL {
		r.dropLocked(id)
		rr = nil
	}
	if rr == nil {
		for len(r.runs) >= r.cfg.MaxRuns {
			if !r.evictLocked(id, runsHeld) {
				break // unreachable: MaxRuns >= 1 and id is not recorded yet
			}
		}
		rr = &runRec{created: now, index: make(map[cachekey.Key]int)}
		r.runs[id] = rr
	}
	rr.updated = now
	r.dirty = true
	i, ok := rr.index[key]
	if !ok {
		if len(rr.keys) >= r.cfg.MaxKeysPerRun {
			rr.truncated, rr.unshared = true, true
			return
		}
		for r.total >= r.cfg.MaxTotalKeys {
			if !r.evictLocked(id, keysHeld) {
				rr.truncated, rr.unshared = true, true
				return
			}
		}
		rr.keys = append(rr.keys, KeyRecord{Key: key.String()})
		rr.first = append(rr.first, now)
		rr.unshared = true
		i = len(rr.keys) - 1
		rr.index[key] = i
		r.total++
	}
	k := &rr.keys[i]
	before := *k
	if write {
		k.Written = true
		if name != "" {
			k.Name = name
		}
	} else {
		k.LookedUp = true
	}
	// A lookup of a known key changes only the updated time: flush it
	// rarely, enough to keep the run from expiring elsewhere.
	if *k != before || now.Sub(rr.flushed) > refreshShared {
		rr.unshared = true
	}
}

// Manifest returns a copy of the run's manifest. With Config.Shared it is
// the merge of this replica's records and every replica's part (see
// shared.go); when the backend cannot be read it is this replica's records
// alone (the failure is logged).
//
// # Errors
//   - ErrUnknownRun when the run was never recorded in ns (on any replica),
//     or expired or was evicted.
//   - ErrUnavailable when Shared could not be read and this replica has no
//     record of the run.
func (r *Recorder) Manifest(ctx context.Context, ns, run string) (Manifest, error) {
	local, ok := r.part(ns, run)
	if r.cfg.Shared != nil {
		return r.merged(ctx, ns, run, local, ok)
	}
	if !ok {
		return Manifest{}, r.unknown(ns, run)
	}
	return local.manifest(), nil
}

func (r *Recorder) unknown(ns, run string) error {
	return fmt.Errorf("%w %q in namespace %q: no request carried it in the last %s, or it was evicted", ErrUnknownRun, run, ns, r.cfg.TTL)
}

// part returns a copy of the local records of a live run.
func (r *Recorder) part(ns, run string) (Part, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rr := r.runs[runID{ns, run}]
	if rr == nil || r.cfg.Now().Sub(rr.updated) > r.cfg.TTL {
		return Part{}, false
	}
	return rr.part(r.cfg.ReplicaID, ns, run), true
}

// Counts returns the number of runs and keys held, for metrics.
func (r *Recorder) Counts() (runs, keys int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs), r.total
}

// runsHeld and keysHeld are what a run weighs against the run bound and
// the total-key bound, for evictLocked.
func runsHeld(*runRec) int    { return 1 }
func keysHeld(rr *runRec) int { return len(rr.keys) }

// evictLocked drops the least recently updated run, other than keep, of the
// namespace whose runs weigh the most (ties: the namespace holding the
// oldest such run), and reports whether one was dropped. keep's weight
// counts for its namespace: a run that grows past its fair share evicts its
// namespace's older runs.
func (r *Recorder) evictLocked(keep runID, weight func(*runRec) int) bool {
	type share struct {
		weight int
		oldest runID
		t      time.Time
		found  bool
	}
	shares := make(map[string]*share)
	for id, rr := range r.runs {
		sh := shares[id.ns]
		if sh == nil {
			sh = &share{}
			shares[id.ns] = sh
		}
		sh.weight += weight(rr)
		if id != keep && (!sh.found || rr.updated.Before(sh.t)) {
			sh.oldest, sh.t, sh.found = id, rr.updated, true
		}
	}
	var victim *share
	for _, sh := range shares {
		if sh.found && (victim == nil || sh.weight > victim.weight || sh.weight == victim.weight && sh.t.Before(victim.t)) {
			victim = sh
		}
	}
	if victim == nil {
		return false
	}
	r.dropLocked(victim.oldest)
	return true
}

func (r *Recorder) dropLocked(id runID) {
	if rr := r.runs[id]; rr != nil {
		r.total -= len(rr.keys)
		delete(r.runs, id)
		r.dirty = true
	}
}

// snapshot is the file format.
type snapshot struct {
	Version int        `json:"version"`
	Runs    []Manifest `json:"runs"`
}

// Save flushes changed runs to Config.Shared, if set, and writes the
// snapshot to Config.Path atomically when anything changed since the last
// Save. It drops expired runs first. Without either it does nothing.
func (r *Recorder) Save() error {
	var ferr error
	if r.cfg.Shared != nil {
		ferr = r.Flush(context.Background())
	}
	if r.cfg.Path == "" {
		return ferr
	}
	if err := r.save(); err != nil {
		return errors.Join(err, ferr)
	}
	return ferr
}

func (r *Recorder) save() error {
	r.mu.Lock()
	now := r.cfg.Now()
	for id, rr := range r.runs {
		if now.Sub(rr.updated) > r.cfg.TTL {
			r.dropLocked(id)
		}
	}
	if !r.dirty {
		r.mu.Unlock()
		return nil
	}
	snap := snapshot{Version: 1}
	for id, rr := range r.runs {
		snap.Runs = append(snap.Runs, Manifest{
			Run: id.run, Namespace: id.ns, Created: rr.created, Updated: rr.updated,
			Keys: append([]KeyRecord(nil), rr.keys...), Truncated: rr.truncated,
		})
	}
	r.dirty = false
	r.mu.Unlock()
	if err := writeFileAtomic(r.cfg.Path, func(f *os.File) error {
		return json.NewEncoder(f).Encode(&snap)
	}); err != nil {
		r.mu.Lock()
		r.dirty = true
		r.mu.Unlock()
		return fmt.Errorf("save run manifests: %w", err)
	}
	return nil
}

func (r *Recorder) load() error {
	f, err := os.Open(r.cfg.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open run manifests: %w", err)
	}
	defer f.Close()
	var snap snapshot
	if err := json.NewDecoder(f).Decode(&snap); err != nil {
		return fmt.Errorf("decode run manifests %s: %w", r.cfg.Path, err)
	}
	now := r.cfg.Now()
	for _, m := range snap.Runs {
		if now.Sub(m.Updated) > r.cfg.TTL || len(r.runs) >= r.cfg.MaxRuns {
			continue
		}
		rr := &runRec{created: m.Created, updated: m.Updated, truncated: m.Truncated, index: make(map[cachekey.Key]int)}
		for _, k := range m.Keys {
			key, err := cachekey.ParseKey(k.Key)
			if err != nil || len(rr.keys) >= r.cfg.MaxKeysPerRun || r.total >= r.cfg.MaxTotalKeys {
				continue
			}
			if _, dup := rr.index[key]; dup {
				continue
			}
			rr.index[key] = len(rr.keys)
			rr.keys = append(rr.keys, k)
			// The file keeps no first-use times: keep the order.
			rr.first = append(rr.first, m.Created.Add(time.Duration(len(rr.first))))
			r.total++
		}
		r.runs[runID{m.Namespace, m.Run}] = rr
	}
	return nil
}

// writeFileAtomic writes path through a temp file in the same directory,
// syncs it and renames it over path; the temp file is removed on error.
func writeFileAtomic(path string, write func(*os.File) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	// os errors name the operation and the file: no prefix of ours.
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return nil
}
