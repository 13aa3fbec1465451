package api

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/wire"
)

// statsAPI serves the statistics, the explained misses and the dashboard.
type statsAPI struct {
	store   Store
	stats   *stats.Stats
	leases  *lease.Table
	version string
	fleet   FleetView                   // nil on a server on its own
	shared  func() wire.SharedTierState // nil without a shared tier
}

// routes declares the stats and dashboard routes.
func (g *statsAPI) routes() []Route {
	return append([]Route{
		{Method: http.MethodGet, Path: "/v1/stats", Access: adminAll, Handler: g.handleStats},
		{Method: http.MethodGet, Path: "/v1/:ns/stats", Access: readNS, Handler: g.handleStats},
		{Method: http.MethodGet, Path: "/v1/:ns/misses", Access: readNS, Handler: g.handleMisses},
	}, assetRoutes()...)
}

// maxRecentMisses bounds StatsResponse.RecentMisses.
const maxRecentMisses = 50

// handleStats serves GET /v1/stats[?since=6h&step=5m] (every namespace;
// time series when since is given) and GET /v1/{ns}/stats?since=&step= (one
// namespace; by default the last 6 hours in 5-minute steps). There is one
// set of totals, the persisted one.
func (g *statsAPI) handleStats(c *fiber.Ctx) error {
	ns := reqOf(c).Namespace
	now := time.Now()
	since, step, wantSeries, err := seriesParams(c, now, ns != "")
	if err != nil {
		return err
	}
	r := wire.StatsResponse{
		Snapshot: g.stats.Snapshot(stats.SnapshotOptions{Namespace: ns}),
		Server:   wire.StatsServer{Version: g.version},
		Store:    g.store.Usage(),
		Leases:   leaseCounts(g.leases),
		Format:   wire.StatsFormat, StoreScope: wire.StoreScopeServer,
	}
	if r.Store.Tier == "" { // a store of its own (a tiered store says shared)
		r.Store.Tier = wire.StoreTierLocal
	}
	if ns != "" {
		r.StoreScope = wire.StoreScopeNamespace
		// A reader of ns alone gets ns's usage, not the whole store's:
		// the store's bytes and blobs count unique contents, so their
		// growth would tell an uploader whether another namespace already
		// held the very bytes it sent. The size limit is configuration.
		// On a fleet replica that is the hot tier's (quotas bound each
		// hot tier), under the hot tier's limit.
		own := g.namespaceUsage(ns, r.Store.Namespaces)
		tier, limit := r.Store.Tier, r.Store.MaxBytes
		if r.Store.Hot != nil {
			tier, limit = wire.StoreTierHot, r.Store.Hot.MaxBytes
		}
		r.Store = wire.StoreUsage{Tier: tier, Entries: own.Entries, Bytes: own.Bytes, MaxBytes: limit,
			Namespaces: []wire.NamespaceUsage{own}}
		r.Snapshot.StoreCounters = wire.Global{MaxBytes: r.Snapshot.StoreCounters.MaxBytes}
		h, w := g.leases.CountsIn(ns)
		r.Leases = wire.LeaseCounts{Held: int64(h), Waiting: int64(w)}
	} else {
		tracked := make(map[string]bool, len(r.Snapshot.Namespaces))
		for _, n := range r.Snapshot.Namespaces {
			tracked[n.Namespace] = true
		}
		r.Store.Namespaces = boundUsage(r.Store.Namespaces, tracked, maxStatsNamespaces)
	}
	withPersistedEvictions(r.Store.Namespaces, persistedEvictions(r.Snapshot.Namespaces)) // nsevictions.go
	if r.StoreScope == wire.StoreScopeServer {
		r.Store = replicaTiers(r.Store)
	}
	r.RecentMisses = g.recentMisses(ns, r.Snapshot.Namespaces)
	if g.shared != nil {
		st := g.shared()
		r.SharedTier = &st
	}
	if err := g.addFleet(c, &r); err != nil {
		return err
	}
	if wantSeries {
		ser, err := g.stats.Series(ns, since, step)
		if err != nil {
			return fmt.Errorf("read stats series: %w", err)
		}
		r.Series = &ser
	}
	return c2json(c, r)
}

// replicaTiers returns u, a tiered store's usage, in the shape of stats
// format 4: the outer figures the shared tier's alone, and the hot tier's
// disk use, evictions and namespaces (quotas bound each hot tier) under
// u.Hot. A tiered store's Usage keeps them outer too, for the metrics and
// the statistics' samples, which are this process's; an answer's top level
// is read as the fleet's. u of a store without tiers is returned as is.
func replicaTiers(u wire.StoreUsage) wire.StoreUsage {
	if u.Hot == nil {
		return u
	}
	hot := *u.Hot
	hot.DiskBytes, hot.Evictions, hot.Namespaces = u.DiskBytes, u.Evictions, u.Namespaces
	u.DiskBytes, u.Evictions, u.Namespaces = 0, 0, nil
	u.Hot = &hot
	return u
}

// namespaceUsager is a store that reports one namespace's usage against
// its quota (*store.Badger, *tiered.Store).
type namespaceUsager interface {
	NamespaceUsage(ns string) wire.NamespaceUsage
}

// namespaceUsage returns namespace ns's usage: from the store when it can
// say (with the quota that applies to a namespace it holds nothing of),
// else from all, the store's list.
func (g *statsAPI) namespaceUsage(ns string, all []wire.NamespaceUsage) wire.NamespaceUsage {
	if u, ok := g.store.(namespaceUsager); ok {
		return u.NamespaceUsage(ns)
	}
	for _, u := range all {
		if u.Namespace == ns {
			return u
		}
	}
	return wire.NamespaceUsage{Namespace: ns}
}

// addFleet adds the fleet's view to r when the request asks for
// ?scope=fleet (GET /v1/stats only: it needs admin on every namespace).
func (g *statsAPI) addFleet(c *fiber.Ctx, r *wire.StatsResponse) error {
	switch scope := c.Query("scope"); {
	case scope == "" || scope == "replica":
		return nil
	case scope != "fleet":
		return Errorf(http.StatusBadRequest, "bad_scope", "scope=%s is unknown: use replica (this server, the default) or fleet.", wire.Echo(scope))
	case reqOf(c).Namespace != "":
		return Errorf(http.StatusBadRequest, "bad_scope", "scope=fleet is served by GET /v1/stats only.")
	case g.fleet == nil:
		return Errorf(http.StatusBadRequest, "no_fleet", "This server is not part of a fleet (it has no shared tier: serve --s3-endpoint).")
	}
	f, err := g.fleet.Fleet(c.UserContext())
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "fleet_unavailable",
			Message: sentence("the fleet's heartbeats cannot be read from the shared tier: " + err.Error()), Err: err}
	}
	r.Fleet = &f
	return nil
}

// leaseCounts returns the leases held and waited for.
func leaseCounts(t *lease.Table) wire.LeaseCounts {
	h, w := t.Counts()
	return wire.LeaseCounts{Held: int64(h), Waiting: int64(w)}
}

// c2json writes v as JSON, uncached.
func c2json(c *fiber.Ctx, v any) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(v)
}

// recentMisses merges the newest misses of ns (or of every namespace).
func (g *statsAPI) recentMisses(ns string, nss []stats.NamespaceTotals) []stats.Miss {
	if ns != "" {
		return g.stats.Misses(ns, maxRecentMisses).Recent
	}
	var out []stats.Miss
	for _, n := range nss {
		out = append(out, g.stats.Misses(n.Namespace, maxRecentMisses).Recent...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > maxRecentMisses {
		out = out[:maxRecentMisses]
	}
	if out == nil {
		out = []stats.Miss{}
	}
	return out
}

// seriesParams parses ?since= (a duration back from now such as "6h", an
// RFC 3339 time or Unix seconds) and ?step= (a duration or seconds).
func seriesParams(c *fiber.Ctx, now time.Time, byDefault bool) (since time.Time, step time.Duration, want bool, err error) {
	sinceStr, stepStr := c.Query("since"), c.Query("step")
	if sinceStr == "" && !byDefault {
		return time.Time{}, 0, false, nil
	}
	since = now.Add(-6 * time.Hour)
	if sinceStr != "" {
		if since, err = parseSince(sinceStr, now); err != nil {
			return since, 0, false, Errorf(http.StatusBadRequest, "bad_since", "%s", err)
		}
	}
	if !since.Before(now) {
		return since, 0, false, Errorf(http.StatusBadRequest, "bad_since", "since=%q is not in the past.", sinceStr)
	}
	step = time.Minute
	if stepStr == "" {
		step = now.Sub(since) / 72
	} else if step, err = parseStep(stepStr); err != nil || step <= 0 {
		return since, 0, false, Errorf(http.StatusBadRequest, "bad_step",
			"step=%s is not a positive duration: use e.g. 1m, 5m, 1h or seconds.", wire.Echo(stepStr))
	}
	return since, step, true, nil
}

// oldestSince is the earliest ?since= accepted: no cachesvc statistics go
// back so far, so an earlier time is a mistake, most likely a duration
// without its unit ("5" for 5h), which would read as Unix seconds in 1970.
var oldestSince = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// parseSince parses ?since=: a duration back from now (not negative), an
// RFC 3339 time or Unix seconds, not before oldestSince in any form. Its
// error is the bad_since message.
func parseSince(v string, now time.Time) (time.Time, error) {
	var t time.Time
	// unitless: digits of a number without a unit, for the hint that it
	// may be a duration missing its unit.
	unitless := ""
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			// Not taken as its absolute value: "-5h" may be a mistake for
			// some other time, and 400 says so rather than guess.
			return time.Time{}, fmt.Errorf("since=%q is a negative duration: give how far back from now as a positive one (%s), an RFC 3339 time or Unix seconds.", v, strings.TrimPrefix(v, "-"))
		}
		t = now.Add(-d)
	} else if t, err = time.Parse(time.RFC3339, v); err != nil {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("since=%s is not a time: use a duration back from now (6h, 90m), an RFC 3339 time or Unix seconds.", wire.Echo(v))
		}
		unitless = strings.TrimPrefix(v, "-")
		if sec < 0 {
			// Checked before time.Unix, whose arithmetic a number this far
			// back would overflow.
			return time.Time{}, fmt.Errorf("since=%q is a negative Unix time (before 1970): a number without a unit is Unix seconds; for a duration back from now give a positive one with its unit (%ss, %sm or %sh).", v, unitless, unitless, unitless)
		}
		t = time.Unix(sec, 0)
	}
	if t.Before(oldestSince) {
		msg := fmt.Sprintf("since=%q is %s, before 2000, long before any statistics were kept: ", v, t.UTC().Format(time.RFC3339))
		if unitless != "" {
			return time.Time{}, fmt.Errorf("%sa number without a unit is Unix seconds; for a duration back from now give its unit (%ss, %sm or %sh).", msg, unitless, unitless, unitless)
		}
		return time.Time{}, fmt.Errorf("%sgive a later time or a shorter duration back from now (6h, 90m).", msg)
	}
	return t, nil
}

func parseStep(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse step %s: %w", wire.Echo(v), err)
	}
	return time.Duration(sec) * time.Second, nil
}

// handleMisses serves GET /v1/{ns}/misses[?limit=N]: the namespace's recent
// misses with their explanations, newest first, and its miss counts by
// reason.
func (g *statsAPI) handleMisses(c *fiber.Ctx) error {
	limit := 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Errorf(http.StatusBadRequest, "bad_limit", "limit=%s must be a positive integer.", wire.Echo(v))
		}
		limit = n
	}
	return c2json(c, g.stats.Misses(reqOf(c).Namespace, limit))
}
