// Package registry is the fleet's view of itself, kept in the shared bucket
// beside the cache's objects: each replica's heartbeat (who is up, its hot
// tier, its view of the shared tier, its stats) and each replica's access
// log (which entries it served, so that gc keeps them).
//
// # Objects
//
// Under the fleet's prefix (s3.Config.Prefix):
//
//	replicas/<id>.json                    one replica's ReplicaStatus, rewritten every heartbeat
//	access/<id>/<unix nanoseconds>.json   the entries one replica served since its last flush
//
// A heartbeat object is small (a few KiB; bounded to MaxStatusBytes by
// trimming the snapshot's runs and top entries), so a fleet of 1,000
// replicas heartbeating every 10 s costs 100 PUTs a second, and reading the
// fleet costs one LIST and one GET per replica (Fleet caches the result
// for a second or two).
//
// # Health
//
// Health is derived by the reader from the heartbeat's age (the writer's
// clock against the reader's: replicas are expected to run NTP): ok up to
// three of the replica's heartbeat intervals, stale after that, gone after
// Config.GoneAfter (1 h), and stopped when the replica's last heartbeat
// said it was shutting down. Objects of gone and stopped replicas stay
// until `cachesvc gc` removes them (those older than GoneAfter), so that
// the dashboard shows a replica that died; their stats stay in the fleet's
// totals until then.
//
// # Failure
//
// The heartbeat runs in its own goroutine and never blocks a request. When
// the bucket is unreachable it logs once when the outage starts, then at
// most every ten minutes while it lasts, and once when it ends; a missed
// heartbeat is just late (other replicas see this one turn stale).
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/singleflight"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Defaults for the zero values of Config fields.
const (
	// DefaultInterval is the default Config.Interval.
	DefaultInterval = 10 * time.Second
	// DefaultFleetTimeout is the default Config.FleetTimeout: a LIST and
	// a GET per replica (eight at a time) take well under a second on a
	// healthy bucket, even for hundreds of replicas, while a person at
	// the dashboard or `cachesvc stats --scope fleet` should learn within
	// seconds that a hung bucket will not answer.
	DefaultFleetTimeout = 10 * time.Second
	// DefaultGoneAfter is the default Config.GoneAfter, and the age at
	// which gc removes a replica's heartbeat object.
	DefaultGoneAfter = time.Hour
	// StaleIntervals is how many heartbeat intervals a replica may miss
	// before it is stale.
	StaleIntervals = 3
	// MaxStatusBytes bounds one heartbeat object; a larger one is trimmed
	// (fewer runs and top entries) until it fits.
	MaxStatusBytes = 256 << 10
	// outageLogEvery is how often an outage that goes on is logged again.
	outageLogEvery = 10 * time.Minute
)

// Sample is what a replica reports about itself at each heartbeat.
type Sample struct {
	// Hot is the hot tier's usage (store.Store.Usage of the Badger store);
	// the heartbeat gives it Tier wire.StoreTierHot when it names none.
	Hot wire.StoreUsage
	// Shared is the replica's view of the shared tier.
	Shared wire.SharedTierState
	// Stats is the replica's stats snapshot (stats.Stats.Snapshot); nil
	// publishes none. The registry trims a copy to bound its size.
	Stats *wire.Snapshot
	// Config is what this replica must agree on with the fleet; nil
	// publishes none (e.g. while the plugins still load).
	Config *wire.ReplicaConfig
}

// Config configures a Registry. Bucket and ID are required; the zero value
// of every other field means its default.
type Config struct {
	// Bucket is the shared tier (Dial).
	Bucket *Bucket
	// ID names this replica (CheckID); DefaultID derives a stable one.
	ID string
	// Version is the replica's version string.
	Version string
	// URL is the address other replicas and people can reach this replica
	// at; empty publishes none.
	URL string
	// Interval is how often the heartbeat is written. Default 10 s.
	Interval time.Duration
	// GoneAfter is the heartbeat age past which List calls a replica gone.
	// Default 1 h.
	GoneAfter time.Duration
	// FleetTimeout bounds one read of the fleet's heartbeats by Fleet.
	// Default DefaultFleetTimeout.
	FleetTimeout time.Duration
	// Sample is called at each heartbeat, on the heartbeat's goroutine; it
	// must be cheap and do no I/O (stats.Snapshot and Usage are). Nil
	// publishes identity and times only.
	Sample func() Sample
	// MaxRuns and MaxTopEntries bound the snapshot in a heartbeat; defaults
	// 20 and 20.
	MaxRuns, MaxTopEntries int
	// Now replaces time.Now (tests).
	Now func() time.Time
	// Logger receives the registry's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Registry publishes this replica's heartbeat and reads the fleet's. Create
// one with New, call Start once serving, and Close at shutdown. It is safe
// for concurrent use.
type Registry struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	startOnce sync.Once
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	base      context.Context // the loop's requests; canceled by Close
	cancel    context.CancelFunc

	outage outage

	// lastWrite is when the last heartbeat was written, as the status it
	// wrote says (Unix nanoseconds; 0 before the first).
	lastWrite atomic.Int64

	fleetMu  sync.Mutex // guards the two below; never held during I/O
	fleetAt  time.Time
	fleetVal wire.FleetStats
	// fleetReads shares one read of the fleet between the Fleet calls
	// that arrive while it runs.
	fleetReads singleflight.Group
}

// New checks cfg and returns a Registry. It does no I/O.
func New(cfg Config) (*Registry, error) {
	if cfg.Bucket == nil {
		return nil, fmt.Errorf("new registry: %w: no bucket", store.ErrInvalid)
	}
	if err := CheckID(cfg.ID); err != nil {
		return nil, fmt.Errorf("new registry: %w", err)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.GoneAfter <= 0 {
		cfg.GoneAfter = DefaultGoneAfter
	}
	if cfg.FleetTimeout <= 0 {
		cfg.FleetTimeout = DefaultFleetTimeout
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 20
	}
	if cfg.MaxTopEntries <= 0 {
		cfg.MaxTopEntries = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Registry{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	r.base, r.cancel = context.WithCancel(context.Background())
	r.started = cfg.Now().UTC()
	return r, nil
}

// ID returns the replica's id.
func (r *Registry) ID() string { return r.cfg.ID }

// Start starts the heartbeat: one now, then one every Config.Interval, each
// bounded by the interval so that a hung request cannot delay the next.
// Calling it again does nothing.
func (r *Registry) Start() {
	r.startOnce.Do(func() { go r.loop() })
}

func (r *Registry) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(r.base, r.cfg.Interval)
		_ = r.publish(ctx, wire.ReplicaServing) // logged by publish
		cancel()
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

// Publish writes one heartbeat now (the loop does this by itself; tests
// and tools call it). Its failure is also logged, per outage.
func (r *Registry) Publish(ctx context.Context) error {
	return r.publish(ctx, wire.ReplicaServing)
}

// Close stops the heartbeat and writes a last one marked stopping, bounded
// by ctx (give it a second or two of the shutdown's time). It returns that
// write's error; calling it again does nothing and returns nil.
func (r *Registry) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		close(r.stop)
		r.cancel()                               // a heartbeat in flight gives way to the last one
		r.startOnce.Do(func() { close(r.done) }) // never started: nothing to wait for
		<-r.done
		err = r.publish(ctx, wire.ReplicaStopping)
	})
	return err
}

// Status returns the heartbeat this replica would publish now.
func (r *Registry) Status(state string) wire.ReplicaStatus {
	now := r.cfg.Now().UTC()
	st := wire.ReplicaStatus{
		ID: r.cfg.ID, Version: r.cfg.Version, URL: r.cfg.URL,
		Started: r.started, Heartbeat: now, State: state, Interval: r.cfg.Interval.Seconds(),
	}
	if r.cfg.Sample != nil {
		s := r.cfg.Sample()
		st.Hot, st.Shared, st.Config = s.Hot, s.Shared, s.Config
		// The Badger store's usage names no tier (it is a store of its
		// own); in a heartbeat it is the replica's hot tier, as in a stats
		// answer's store.hot, which readers tell apart by tier.
		if st.Hot.Tier == "" {
			st.Hot.Tier = wire.StoreTierHot
		}
		if s.Stats != nil {
			snap := trimSnapshot(*s.Stats, r.cfg.MaxRuns, r.cfg.MaxTopEntries)
			st.Totals, st.Stats = snap.Totals, &snap
		}
	}
	return st
}

// publish encodes and writes the heartbeat, and tracks the outage state.
func (r *Registry) publish(ctx context.Context, state string) error {
	js, err := encodeStatus(r.Status(state))
	if err != nil {
		r.log.Error("encode heartbeat", "err", err)
		return err
	}
	b := r.cfg.Bucket
	name := b.ReplicaObject(r.cfg.ID)
	_, err = b.Client.PutObject(ctx, b.Name, name, bytes.NewReader(js), int64(len(js)),
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	if err != nil {
		err = fmt.Errorf("write heartbeat s3://%s/%s: %w", b.Name, name, err)
	}
	if err != nil && state == wire.ReplicaServing && r.base.Err() != nil {
		return err // canceled by Close, which writes the last heartbeat itself
	}
	r.outage.report(r.log, r.cfg.Now(), "heartbeat", err)
	if err == nil {
		r.lastWrite.Store(r.cfg.Now().UnixNano())
	}
	return err
}

// LastHeartbeat returns when this replica last wrote its heartbeat
// successfully; the zero time before its first. Its age says whether the
// other replicas (and gc) see this one as healthy: past three intervals they
// call it stale.
func (r *Registry) LastHeartbeat() time.Time {
	if n := r.lastWrite.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// encodeStatus marshals st, trimming it until it fits MaxStatusBytes: the
// hot tier's per-namespace usage first (the fleet view shows a replica's
// hot tier in total, and a replica of thousands of namespaces made a
// heartbeat of megabytes), then the snapshot's runs and top entries, then
// its namespaces.
func encodeStatus(st wire.ReplicaStatus) ([]byte, error) {
	for {
		js, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("encode heartbeat: %w", err)
		}
		if len(js) <= MaxStatusBytes {
			return js, nil
		}
		s := st.Stats
		switch {
		case len(st.Hot.Namespaces) > 0:
			st.Hot.Namespaces = st.Hot.Namespaces[:len(st.Hot.Namespaces)/2]
		case s == nil:
			return js, nil // identity and totals only: nothing left to trim
		case len(s.Runs) > 0 || len(s.TopEntries) > 0 || len(s.MissReasons) > 0:
			s.Runs, s.TopEntries, s.MissReasons = s.Runs[:len(s.Runs)/2], s.TopEntries[:len(s.TopEntries)/2], s.MissReasons[:len(s.MissReasons)/2]
		case len(s.Namespaces) > 0:
			s.Namespaces = s.Namespaces[:len(s.Namespaces)/2]
		default:
			st.Stats = nil
		}
	}
}

// trimSnapshot returns a copy of s with at most maxRuns runs and maxTop top
// entries (they come sorted, most relevant first).
func trimSnapshot(s wire.Snapshot, maxRuns, maxTop int) wire.Snapshot {
	s.Runs = append([]wire.RunTotals(nil), s.Runs[:min(len(s.Runs), maxRuns)]...)
	s.TopEntries = append([]wire.TopEntry(nil), s.TopEntries[:min(len(s.TopEntries), maxTop)]...)
	s.Namespaces = append([]wire.NamespaceTotals(nil), s.Namespaces...)
	s.MissReasons = append([]wire.ReasonCount(nil), s.MissReasons...)
	return s
}

// outage logs a run of failures of one kind once when it starts, again at
// most every outageLogEvery while it lasts, and once when it ends, so that
// a bucket down for an hour costs a handful of log lines, not 360.
type outage struct {
	mu      sync.Mutex
	since   time.Time // zero when not failing
	lastLog time.Time
	misses  int
}

func (o *outage) report(log *slog.Logger, now time.Time, what string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil && !o.since.IsZero():
		log.Info("shared tier reachable again: "+what+" resumed", "outage", now.Sub(o.since).Round(time.Second), "failures", o.misses)
		o.since, o.misses = time.Time{}, 0
	case err == nil:
	case o.since.IsZero():
		log.Warn(what+" failed; the shared tier may be unreachable (logged again every 10m while it lasts)", "err", err)
		o.since, o.lastLog, o.misses = now, now, 1
	default:
		o.misses++
		if now.Sub(o.lastLog) >= outageLogEvery {
			log.Warn(what+" still failing", "since", o.since, "failures", o.misses, "err", err)
			o.lastLog = now
		}
	}
}

// isNotFound reports whether err, or an error it wraps, is S3's answer for
// a missing object (minio.ToErrorResponse does not unwrap).
func isNotFound(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	return resp.Code == "NoSuchKey" || resp.StatusCode == 404 && resp.Code != "NoSuchBucket"
}

// errNotStatus marks an object under replicas/ that is not a heartbeat.
var errNotStatus = errors.New("not a replica heartbeat")
