package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/fleet/state"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/tiered"
	"github.com/cachesvc/cachesvc/wire"
)

// s3Options are the flags naming the fleet's shared tier: an S3-compatible
// bucket. Credentials come from --s3-credentials-file or, without it, the
// standard AWS sources (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the
// shared credentials file, instance metadata).
type s3Options struct {
	Endpoint        string
	Bucket          string
	Prefix          string
	Region          string
	Insecure        bool
	CredentialsFile string
	Profile         string
	CheckThenWrite  bool
}

// register adds the --s3-* flags to fs.
func (o *s3Options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", "shared tier: the S3-compatible server's `host:port` (e.g. s3.us-east-1.amazonaws.com, storage.googleapis.com, rgw:7480; an http:// scheme implies --s3-insecure)")
	fs.StringVar(&o.Bucket, "s3-bucket", "", "shared tier: the `bucket` (must exist)")
	fs.StringVar(&o.Prefix, "s3-prefix", "cachesvc/", "shared tier: object name `prefix`, so that several fleets can share a bucket")
	fs.StringVar(&o.Region, "s3-region", "", "shared tier: the bucket's `region` (empty: discovered)")
	fs.BoolVar(&o.Insecure, "s3-insecure", false, "shared tier: plain HTTP instead of HTTPS (a server on loopback or a private network)")
	fs.StringVar(&o.CredentialsFile, "s3-credentials-file", "", "shared tier: AWS credentials `file` (INI, as ~/.aws/credentials); default: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then the shared credentials file, then instance metadata")
	fs.StringVar(&o.Profile, "s3-profile", "", "shared tier: `profile` in the credentials file (default: AWS_PROFILE or \"default\")")
}

// registerWrites adds the flags that only a writer of the shared tier
// (serve) needs.
func (o *s3Options) registerWrites(fs *flag.FlagSet) {
	fs.BoolVar(&o.CheckThenWrite, "s3-check-then-write", false, "shared tier: for servers without conditional writes (If-None-Match: *): check, then write (see README, Running a fleet)")
}

// enabled reports whether a shared tier is configured.
func (o *s3Options) enabled() bool { return o.Endpoint != "" }

// validate checks the flags that go together and normalizes the
// endpoint (a scheme is accepted: http:// implies --s3-insecure).
func (o *s3Options) validate() error {
	switch {
	case strings.HasPrefix(o.Endpoint, "http://"):
		o.Endpoint, o.Insecure = strings.TrimPrefix(o.Endpoint, "http://"), true
	case strings.HasPrefix(o.Endpoint, "https://"):
		o.Endpoint = strings.TrimPrefix(o.Endpoint, "https://")
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	switch {
	case !o.enabled() && (o.Bucket != "" || o.CredentialsFile != ""):
		return usagef("--s3-bucket and --s3-credentials-file need --s3-endpoint")
	case o.enabled() && o.Bucket == "":
		return usagef("--s3-endpoint needs --s3-bucket")
	case strings.Contains(o.Endpoint, "/"):
		return usagef("--s3-endpoint %q: want host[:port], without a path", o.Endpoint)
	}
	// The S3 client refuses such a name before sending anything, and that
	// refusal looked like an unreachable server: serve ran degraded for
	// good. It is a typo to fix now.
	if err := s3utils.CheckValidBucketName(o.Bucket); o.enabled() && err != nil {
		return usagef("--s3-bucket %q is not a bucket name: %s", o.Bucket, strings.ToLower(err.Error()))
	}
	return nil
}

// config returns the S3 store's configuration, with the credentials file
// read now so that a bad one stops the command before anything opens.
func (o *s3Options) config(maxEntry int64, logger *slog.Logger) (s3.Config, error) {
	if err := o.validate(); err != nil {
		return s3.Config{}, err
	}
	if !o.enabled() {
		return s3.Config{}, usagef("--s3-endpoint and --s3-bucket are required")
	}
	cfg := s3.Config{Endpoint: o.Endpoint, Bucket: o.Bucket, Prefix: o.Prefix, Region: o.Region,
		Insecure: o.Insecure, CheckThenWrite: o.CheckThenWrite, MaxEntryBytes: maxEntry, Logger: logger}
	if o.CredentialsFile != "" {
		v, err := credentials.NewFileAWSCredentials(o.CredentialsFile, o.Profile).GetWithContext(nil)
		if err != nil {
			return cfg, fmt.Errorf("read --s3-credentials-file %s: %w", o.CredentialsFile, err)
		}
		if v.AccessKeyID == "" {
			return cfg, fmt.Errorf("read --s3-credentials-file %s: no aws_access_key_id in profile %q", o.CredentialsFile, o.Profile)
		}
		cfg.AccessKey, cfg.SecretKey, cfg.SessionToken = v.AccessKeyID, v.SecretAccessKey, v.SessionToken
	}
	return cfg, nil
}

// replicaOptions name this replica in its fleet.
type replicaOptions struct {
	ID           string
	AdvertiseURL string
}

// register adds --replica-id and --advertise-url to fs.
func (o *replicaOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.ID, "replica-id", "", "with a shared tier: this replica's `id` in the fleet (default: hostname and a digest of --data, stable across restarts)")
	fs.StringVar(&o.AdvertiseURL, "advertise-url", "", "with a shared tier: the `URL` the fleet's dashboard shows for this replica (default: the URL it serves on)")
}

// openFleetState opens the fleet-wide state on the shared bucket (compile
// leases, run manifests, the signature memo) and sets it in the options of
// the lease table, the run recorder and the keyer. It sends no request: a
// replica whose bucket is down at start still serves, and each part fails
// open on its own terms (fleet/state).
func openFleetState(o *serveOptions, replicaID string, leases *lease.Config, runs *manifest.Config, logger *slog.Logger) error {
	c, err := state.New(o.shared)
	if err != nil {
		return fmt.Errorf("open the fleet's shared state: %w", err)
	}
	leases.Shared, leases.Logger = c.Leases(), logger
	runs.Shared, runs.ReplicaID, runs.Logger = c.Manifests(0), replicaID, logger
	o.Plugins.memo = c.Memo()
	return nil
}

// replicaID is this replica's id: --replica-id, or one derived from the
// data directory that stays the same across restarts.
func (o *serveOptions) replicaID() (string, error) {
	if o.Replica.ID == "" {
		id, err := registry.DefaultID(o.Data)
		if err != nil {
			return "", fmt.Errorf("derive a replica id (set --replica-id): %w", err)
		}
		return id, nil
	}
	if err := registry.CheckID(o.Replica.ID); err != nil {
		return "", usagef("--replica-id: %s", err)
	}
	return o.Replica.ID, nil
}

// fleetMember is a replica's part in its fleet: its heartbeat (and the
// fleet's view) and its access log, both in the shared bucket.
type fleetMember struct {
	reg    *registry.Registry
	access *registry.AccessLog
}

// joinFleet creates this replica's heartbeat and access log on the shared
// bucket; Start begins both. sample reports the replica at each heartbeat.
func joinFleet(o serveOptions, id, url string, sample func() registry.Sample, logger *slog.Logger) (*fleetMember, error) {
	b, err := registry.Dial(o.shared)
	if err != nil {
		return nil, fmt.Errorf("open the fleet's registry: %w", err)
	}
	if o.Replica.AdvertiseURL != "" {
		url = o.Replica.AdvertiseURL
	}
	reg, err := registry.New(registry.Config{Bucket: b, ID: id, Version: appVersion(), URL: url, Sample: sample, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("create the fleet's registry: %w", err)
	}
	acc, err := registry.NewAccessLog(registry.AccessConfig{Bucket: b, ID: id, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("create the fleet's access log: %w", err)
	}
	return &fleetMember{reg: reg, access: acc}, nil
}

// heartbeatMetric is cachesvc_fleet_heartbeat_timestamp_seconds: when this
// replica last wrote its heartbeat, 0 before the first, for an alert on a
// replica whose heartbeat is stale (the fleet view then calls it stale or
// gone, and gc may drop what only it serves).
func (m *fleetMember) heartbeatMetric() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_fleet_heartbeat_timestamp_seconds",
		Help: "Unix time of this replica's last successful heartbeat write to the shared bucket; 0 before the first. Other replicas call it stale past three heartbeat intervals (30 s).",
	}, func() float64 {
		t := m.reg.LastHeartbeat()
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	})
}

// start begins the heartbeat and the access log's flushes.
func (m *fleetMember) start() {
	m.reg.Start()
	m.access.Start()
}

// close flushes the access log and writes the last heartbeat (stopping).
func (m *fleetMember) close(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.access.Close(ctx); err != nil {
		logger.Warn("flush the fleet's access log", "err", err)
	}
	if err := m.reg.Close(ctx); err != nil {
		logger.Warn("write the last heartbeat", "err", err)
	}
}

// serveStores is what serve serves from: the API's store (the hot tier
// alone, or the tiered store in a fleet) and the hot tier, whose entries
// seed the statistics at start.
type serveStores struct {
	api    api.Store
	hot    *store.Badger
	tiered *tiered.Store // nil without a shared tier
}

// sharedState is the replica's view of the shared tier.
func (s serveStores) sharedState() wire.SharedTierState {
	if s.tiered == nil {
		return wire.SharedTierState{}
	}
	st, q := s.tiered.SharedState(), s.tiered.Stats()
	return wire.SharedTierState{Configured: true, Reachable: st.Reachable, LastError: st.LastError,
		LastErrorAt: st.LastErrorAt, QueueDepth: q.QueueEntries}
}

// close closes every tier; a shared tier closed before (CloseShared) is
// not closed again.
func (s serveStores) close() error {
	if s.tiered != nil {
		return s.tiered.Close() // closes both tiers
	}
	return s.hot.Close()
}

// storeHooks are the callbacks openStores passes on: the hot tier's
// evictions and quarantines (store.Config) and the tiered store's events.
type storeHooks struct {
	onEvict      func(m store.Meta, reason string)
	onQuarantine func(ns string, key store.Key)
	observe      func(tiered.Event)
}

// openStores opens the hot tier in o.Data and, with --s3-endpoint, the
// shared tier and the tiered store in front of them.
func openStores(ctx context.Context, o serveOptions, logger *slog.Logger, hooks storeHooks) (serveStores, error) {
	var out serveStores
	hot, err := store.Open(store.Config{
		Dir:            o.Data,
		Version:        versionString(),
		MaxBytes:       o.MaxSize,
		MaxEntryBytes:  o.MaxEntrySize,
		SyncWrites:     o.SyncWrites,
		OnEvict:        hooks.onEvict,
		OnQuarantine:   hooks.onQuarantine,
		Quotas:         o.quotas,
		ExpiryInterval: o.ExpiryInterval,
		Logger:         logger,
	})
	if errors.Is(err, store.ErrInUse) {
		// The common case is a second serve started on the same --data
		// (or the first one still shutting down).
		return out, fmt.Errorf("%w (another process, most likely a cachesvc serve, is using --data %s: stop it first, or give this server its own --data directory)", err, o.Data)
	}
	if err != nil {
		return out, err // "open store DIR: ..."
	}
	out.hot, out.api = hot, hot
	if !o.S3.enabled() {
		return out, nil
	}
	out.tiered, err = openTiered(ctx, o, hot, hooks.observe, logger)
	if err != nil {
		return out, errors.Join(fmt.Errorf("open shared tier s3://%s/%s at %s: %w", o.S3.Bucket, o.S3.Prefix, o.S3.Endpoint, err), closeUnserved(hot))
	}
	out.api = out.tiered
	return out, nil
}

// closeUnserved closes a hot tier that a failed start opened and never
// served. Opening the shared tier can take a minute (an unreachable
// bucket); a --data deleted meanwhile would make Badger's Close wait for
// good (store.Badger.DirErr), and the failed start hang instead of saying
// why. So the store is then left open (the process is about to exit) and
// the error says why: nothing is lost, no request was served.
func closeUnserved(hot *store.Badger) error {
	if err := hot.DirErr(); err != nil {
		return fmt.Errorf("store not closed: %w", err)
	}
	return hot.Close()
}

// openTiered opens the shared tier and the tiered store in front of it and
// hot; on failure it closes what it opened (not hot).
func openTiered(ctx context.Context, o serveOptions, hot *store.Badger, observe func(tiered.Event), logger *slog.Logger) (*tiered.Store, error) {
	spool := filepath.Join(o.Data, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	shared, err := s3.Open(ctx, o.shared)
	if err != nil {
		return nil, err
	}
	ts, err := tiered.New(tiered.Config{Hot: hot, Shared: shared, Mode: tiered.Mode(o.WriteMode), Observe: observe, Logger: logger,
		SpoolDir: spool, QueueDir: filepath.Join(o.Data, "upload-queue"),
		MaxQueueEntries: o.QueueEntries, MaxQueueBytes: o.QueueBytes})
	if err != nil {
		return nil, errors.Join(err, shared.Close())
	}
	return ts, nil
}
