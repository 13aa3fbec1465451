package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/wire"
)

// listFetchers bounds the heartbeat objects List reads at once.
const listFetchers = 8

// fleetTTL is how long Fleet reuses a fleet read: the dashboard of every
// user polls it, and the heartbeats it reads change every 10 s.
const fleetTTL = 2 * time.Second

// List returns every replica's last heartbeat, sorted by ID, with Health
// and HeartbeatAge set (Health). It costs one LIST per 1,000 replicas and
// one GET per replica. An object under replicas/ that is not a heartbeat
// is skipped; one deleted between the listing and its read too.
//
// # Errors
//
// The listing's or a read's error, wrapped, when the bucket cannot be read;
// ctx's, wrapped, when it ends before the listing does.
func (r *Registry) List(ctx context.Context) ([]wire.ReplicaStatus, error) {
	return List(ctx, r.cfg.Bucket, r.cfg.Now(), r.cfg.GoneAfter)
}

// List is Registry.List for a reader that is not a replica (gc, tools):
// health is judged at now with goneAfter (DefaultGoneAfter when 0).
func List(ctx context.Context, b *Bucket, now time.Time, goneAfter time.Duration) ([]wire.ReplicaStatus, error) {
	if goneAfter <= 0 {
		goneAfter = DefaultGoneAfter
	}
	prefix := b.Prefix + ReplicasDir
	var names []string
	for obj := range b.Client.ListObjects(ctx, b.Name, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list replicas s3://%s/%s: %w", b.Name, prefix, obj.Err)
		}
		if b.onListed != nil {
			b.onListed(obj.Key)
		}
		if id, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, prefix), ".json"); ok && CheckID(id) == nil {
			names = append(names, obj.Key)
		}
	}
	// minio-go ends a listing whose ctx ended between two pages without
	// an error: without this check a cancelled listing passed for a
	// shorter finished one.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list replicas s3://%s/%s: %w", b.Name, prefix, err)
	}
	out := make([]*wire.ReplicaStatus, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listFetchers)
	for i, name := range names {
		g.Go(func() error {
			st, err := readStatus(gctx, b, name)
			switch {
			case err == nil:
				out[i] = &st
			case isNotFound(err), err == errNotStatus:
			default:
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	list := make([]wire.ReplicaStatus, 0, len(out))
	for _, st := range out {
		if st != nil {
			st.Health, st.HeartbeatAge = Health(*st, now, goneAfter)
			list = append(list, *st)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list, nil
}

// readStatus reads and decodes one heartbeat object.
func readStatus(ctx context.Context, b *Bucket, name string) (wire.ReplicaStatus, error) {
	var st wire.ReplicaStatus
	obj, err := b.Client.GetObject(ctx, b.Name, name, minio.GetObjectOptions{})
	if err != nil {
		return st, fmt.Errorf("read replica s3://%s/%s: %w", b.Name, name, err)
	}
	defer obj.Close()
	js, err := io.ReadAll(io.LimitReader(obj, 4*MaxStatusBytes))
	if err != nil {
		if isNotFound(err) {
			return st, err
		}
		return st, fmt.Errorf("read replica s3://%s/%s: %w", b.Name, name, err)
	}
	if json.Unmarshal(js, &st) != nil || CheckID(st.ID) != nil {
		return st, errNotStatus
	}
	if !webURL(st.URL) {
		// Every replica's dashboard links the URL: whoever can write
		// the bucket must not get a "javascript:" link into it.
		st.URL = ""
	}
	return st, nil
}

// webURL reports whether s is an absolute http or https URL with a host
// and no control characters, the only kind a heartbeat may advertise.
func webURL(s string) bool {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Health judges a heartbeat at now: HealthGone past goneAfter,
// HealthStopped when its last word was that it was stopping, HealthStale
// after StaleIntervals of its own interval (DefaultInterval when it gave
// none), HealthOK otherwise. age is in seconds, never negative (a writer's
// clock ahead of the reader's reads as age 0).
func Health(st wire.ReplicaStatus, now time.Time, goneAfter time.Duration) (health string, age float64) {
	d := max(now.Sub(st.Heartbeat), 0)
	interval := time.Duration(st.Interval * float64(time.Second))
	if interval <= 0 {
		interval = DefaultInterval
	}
	switch {
	case d > goneAfter:
		health = wire.HealthGone
	case st.State == wire.ReplicaStopping:
		health = wire.HealthStopped
	case d > StaleIntervals*interval:
		health = wire.HealthStale
	default:
		health = wire.HealthOK
	}
	return health, d.Seconds()
}

// Merge turns replicas' heartbeats (List) into the fleet's stats: the
// replicas without their snapshots, the count of healthy ones, and the
// merged totals of every snapshot (stats.MergeSnapshots with its default
// bounds). Every listed replica counts in the totals, whatever its health:
// what a replica that died served was still served, until gc removes its
// object. now stamps GeneratedAt. It does no I/O.
func Merge(replicas []wire.ReplicaStatus, now time.Time) wire.FleetStats {
	fs := wire.FleetStats{GeneratedAt: now.UTC(), Replicas: make([]wire.ReplicaStatus, 0, len(replicas))}
	snaps := make([]wire.Snapshot, 0, len(replicas))
	for _, st := range replicas {
		if st.Stats != nil {
			snaps = append(snaps, *st.Stats)
		}
		if st.Health == wire.HealthOK {
			fs.Healthy++
		}
		st.Stats = nil
		fs.Replicas = append(fs.Replicas, st)
	}
	fs.Totals = stats.MergeSnapshots(snaps, stats.MergeOptions{Now: now})
	fs.ConfigMismatches = ConfigMismatches(fs.Replicas)
	return fs
}

// Fleet returns Merge of List: the fleet part of GET
// /v1/stats?scope=fleet. A result younger than two seconds is reused, and
// concurrent callers share one read, so that dashboards polling many
// replicas cost the bucket little. The read is bounded by
// Config.FleetTimeout, not by any one caller's context (one caller leaving
// does not cut the others' read short), and each caller waits for it only
// until its own ctx ends. The result is shared between callers: do not
// modify it.
//
// # Errors
//
// The read's error when the bucket cannot be read, one saying "no answer
// within" FleetTimeout when it did not answer in time (a hung gateway),
// and ctx's error when the caller's ctx ends first.
func (r *Registry) Fleet(ctx context.Context) (wire.FleetStats, error) {
	r.fleetMu.Lock()
	now := r.cfg.Now()
	if !r.fleetAt.IsZero() && now.Sub(r.fleetAt) < fleetTTL && now.Sub(r.fleetAt) >= 0 {
		v := r.fleetVal
		r.fleetMu.Unlock()
		return v, nil
	}
	r.fleetMu.Unlock()
	select {
	case res := <-r.fleetReads.DoChan("fleet", r.readFleet):
		if res.Err != nil {
			return wire.FleetStats{}, res.Err
		}
		return res.Val.(wire.FleetStats), nil
	case <-ctx.Done():
		return wire.FleetStats{}, fmt.Errorf("read the fleet's heartbeats: %w", ctx.Err())
	}
}

// errFleetTimeout is the cause a fleet read is canceled with at
// Config.FleetTimeout.
var errFleetTimeout = errors.New("fleet read timed out")

// readFleet reads and merges the fleet's heartbeats (the shared read of
// Fleet), bounded by Config.FleetTimeout and by Close.
//
// Before, the read ran under the first caller's context while a mutex was
// held through it: with a hung bucket every dashboard poll waited the S3
// client's tries (three of a minute each) behind the one before it.
func (r *Registry) readFleet() (any, error) {
	ctx, cancel := context.WithTimeoutCause(r.base, r.cfg.FleetTimeout, errFleetTimeout)
	defer cancel()
	list, err := r.List(ctx)
	if err != nil {
		if errors.Is(context.Cause(ctx), errFleetTimeout) {
			// The S3 client reports only "context deadline exceeded", which
			// reads as the client's own deadline: say the bucket did not answer.
			err = fmt.Errorf("no answer within %s from s3://%s/%s%s: the bucket, or the network to it, is down or hung",
				r.cfg.FleetTimeout, r.cfg.Bucket.Name, r.cfg.Bucket.Prefix, ReplicasDir)
		}
		return nil, err
	}
	now := r.cfg.Now()
	v := Merge(list, now)
	r.fleetMu.Lock()
	r.fleetVal, r.fleetAt = v, now
	r.fleetMu.Unlock()
	return v, nil
}
