package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// totals are the server's process-lifetime counters. GET /v1/stats reports
// them when no stats.Stats is configured; with one, the persisted statistics
// take their place.
type totals struct {
	requests     atomic.Int64
	hits         atomic.Int64
	misses       atomic.Int64
	putsCreated  atomic.Int64
	putsExisting atomic.Int64
	putsRejected atomic.Int64
	bytesIn      atomic.Int64
	bytesOut     atomic.Int64
}

// StatsServer describes the serving process in GET /v1/stats.
type StatsServer struct {
	Version string `json:"version"`
	// StatsEnabled is false when the server runs without persisted
	// statistics; Totals are then the process's own counters.
	StatsEnabled bool `json:"stats_enabled"`
}

// LeaseCounts are the compile leases in flight.
type LeaseCounts struct {
	Held    int64 `json:"held"`
	Waiting int64 `json:"waiting"`
}

// StatsResponse is the JSON body of GET /v1/stats and GET /v1/{ns}/stats:
// the persisted statistics (Snapshot: totals per namespace, backend and run,
// top entries, misses by reason), the store's usage, the leases in flight,
// the most recent misses and, when asked for with ?since=, time series.
// The flat counters (Requests … BytesOut) are this process's own, since it
// started, over every namespace.
type StatsResponse struct {
	stats.Snapshot
	Server       StatsServer   `json:"server"`
	Store        store.Usage   `json:"store"`
	Leases       LeaseCounts   `json:"leases"`
	RecentMisses []stats.Miss  `json:"recent_misses"`
	Series       *stats.Series `json:"series,omitempty"`

	Requests     int64   `json:"requests"`
	Hits         int64   `json:"hits"`
	Misses       int64   `json:"misses"`
	HitRate      float64 `json:"hit_rate"`
	PutsCreated  int64   `json:"puts_created"`
	PutsExisting int64   `json:"puts_existing"`
	PutsRejected int64   `json:"puts_rejected"`
	BytesIn      int64   `json:"bytes_in"`
	BytesOut     int64   `json:"bytes_out"`
}

// maxRecentMisses bounds StatsResponse.RecentMisses.
const maxRecentMisses = 50

// handleStats serves GET /v1/stats[?since=6h&step=5m]: totals over every
// namespace, and time series when since is given.
func (s *Server) handleStats(c *fiber.Ctx) error {
	return s.serveStats(c, "", false)
}

// handleNamespaceStats serves GET /v1/{ns}/stats?since=&step=: one
// namespace's totals and time series (default: the last 6 hours in 5-minute
// steps).
func (s *Server) handleNamespaceStats(c *fiber.Ctx) error {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	return s.serveStats(c, ns, true)
}

func (s *Server) serveStats(c *fiber.Ctx, ns string, defaultSeries bool) error {
	now := time.Now()
	since, step, wantSeries, err := seriesParams(c, now, defaultSeries)
	if err != nil {
		return err
	}
	t := s.totals
	r := StatsResponse{
		Server:       StatsServer{Version: s.cfg.Version, StatsEnabled: s.cfg.Stats != nil},
		Store:        s.cfg.Store.Usage(),
		Leases:       s.leaseCounts(),
		RecentMisses: []stats.Miss{},
		Requests:     t.requests.Load(),
		Hits:         t.hits.Load(),
		Misses:       t.misses.Load(),
		PutsCreated:  t.putsCreated.Load(),
		PutsExisting: t.putsExisting.Load(),
		PutsRejected: t.putsRejected.Load(),
		BytesIn:      t.bytesIn.Load(),
		BytesOut:     t.bytesOut.Load(),
	}
	if n := r.Hits + r.Misses; n > 0 {
		r.HitRate = float64(r.Hits) / float64(n)
	}
	st := s.cfg.Stats
	if st == nil {
		pc := stats.Counters{Hits: t.hits.Load(), Misses: t.misses.Load(), BytesIn: t.bytesIn.Load(), BytesOut: t.bytesOut.Load(), Writes: t.putsCreated.Load()}
		pc.Lookups = pc.Hits + pc.Misses
		r.Snapshot = stats.Snapshot{GeneratedAt: now.UTC(), Totals: pc.Totals(),
			Namespaces: []stats.NamespaceTotals{}, Backends: []stats.BackendTotals{}, Runs: []stats.RunTotals{},
			TopEntries: []stats.TopEntry{}, MissReasons: []stats.ReasonCount{}}
		return c2json(c, r)
	}
	r.Snapshot = st.Snapshot(stats.SnapshotOptions{Namespace: ns})
	r.RecentMisses = s.recentMisses(ns, r.Snapshot.Namespaces)
	if wantSeries {
		ser, err := st.Series(ns, since, step)
		if err != nil {
			return fmt.Errorf("read stats series: %w", err)
		}
		r.Series = &ser
	}
	return c2json(c, r)
}

// c2json writes v as JSON, uncached.
func c2json(c *fiber.Ctx, v any) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(v)
}

// recentMisses merges the newest misses of ns (or of every namespace).
func (s *Server) recentMisses(ns string, nss []stats.NamespaceTotals) []stats.Miss {
	var out []stats.Miss
	if ns != "" {
		return s.cfg.Stats.Misses(ns, maxRecentMisses).Recent
	}
	for _, n := range nss {
		out = append(out, s.cfg.Stats.Misses(n.Namespace, maxRecentMisses).Recent...)
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
			return since, 0, false, Errorf(http.StatusBadRequest, "bad_since",
				"since=%q is not a time: use a duration back from now (6h, 90m), an RFC 3339 time or Unix seconds.", sinceStr)
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
			"step=%q is not a positive duration: use e.g. 1m, 5m, 1h or seconds.", stepStr)
	}
	return since, step, true, nil
}

func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			d = -d
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse since %q: %w", v, err)
	}
	return time.Unix(sec, 0), nil
}

func parseStep(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse step %q: %w", v, err)
	}
	return time.Duration(sec) * time.Second, nil
}

// MissesResponse is the JSON body of GET /v1/{ns}/misses.
type MissesResponse = stats.MissReport

// handleMisses serves GET /v1/{ns}/misses[?limit=N]: the namespace's recent
// misses with their explanations, newest first, and its miss counts by
// reason.
func (s *Server) handleMisses(c *fiber.Ctx) error {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	limit := 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Errorf(http.StatusBadRequest, "bad_limit", "limit=%q must be a positive integer.", v)
		}
		limit = n
	}
	if s.cfg.Stats == nil {
		return c2json(c, MissesResponse{Namespace: ns, ByReason: []stats.ReasonCount{}, Recent: []stats.Miss{}})
	}
	return c2json(c, s.cfg.Stats.Misses(ns, limit))
}

// recordLookup counts an entry lookup as a hit or a miss in the process
// totals and /metrics (when no stats.Stats is configured).
func (s *Server) recordLookup(hit bool) {
	// With stats, /metrics exports the persisted lookup counters instead
	// (initStats), so the process-lifetime counter is not kept.
	withStats := s.cfg.Stats != nil
	if hit {
		s.totals.hits.Add(1)
		if !withStats {
			s.metrics.lookups.WithLabelValues("hit").Inc()
		}
		return
	}
	s.totals.misses.Add(1)
	if !withStats {
		s.metrics.lookups.WithLabelValues("miss").Inc()
	}
}

// recordEntryLookup counts a lookup of entry (ns, key) by a request: a hit
// when m is not nil (size bytes served), a miss otherwise. The run id comes
// from the X-Cachesvc-Run header and, on a miss, the backend from
// X-Cachesvc-Backend.
func (s *Server) recordEntryLookup(c *fiber.Ctx, ns string, key cachekey.Key, m *store.Meta, size int64) {
	backend := ""
	if m == nil {
		backend = c.Get(HeaderBackend)
	}
	s.countLookup(ns, c.Get(HeaderRun), backend, key, m, size)
}

// countLookup counts a lookup of entry (ns, key) for run: a hit when m is
// not nil (size bytes served), a miss otherwise; backend names the miss's
// backend when known. It never blocks on I/O.
func (s *Server) countLookup(ns, run, backend string, key cachekey.Key, m *store.Meta, size int64) {
	s.recordLookup(m != nil)
	st := s.cfg.Stats
	if st == nil {
		return
	}
	l := stats.Lookup{Namespace: ns, Key: key, Run: run, Backend: backend, Hit: m != nil}
	if m != nil {
		l.Backend, l.Name, l.CompileSeconds, l.Bytes = m.Backend, m.Name, m.CompileSeconds, size
	}
	st.RecordLookup(l)
}

// servedBytes is how many bytes a GET of [off, off+n) of an entry of size
// bytes sends (n < 0: to the end).
func servedBytes(size, off, n int64) int64 {
	if n >= 0 {
		return n
	}
	return size - off
}

// recordEntryWrite counts a stored entry (ns, key) and indexes its
// components for explaining misses. Call it only when the PUT created the
// entry.
func (s *Server) recordEntryWrite(c *fiber.Ctx, ns string, key cachekey.Key, m store.Meta) {
	st := s.cfg.Stats
	if st == nil {
		return
	}
	run := m.Run
	if run == "" {
		run = c.Get(HeaderRun)
	}
	st.RecordWrite(stats.Write{Namespace: ns, Backend: m.Backend, Run: run, Key: key,
		Name: m.Name, Bytes: m.Size, CompileSeconds: m.CompileSeconds, Components: m.Components})
}

// explainMiss explains a miss of a signature by its components, records it
// among the namespace's recent misses and returns the explanation for the
// 404 body. Without stats it says that it cannot explain.
func (s *Server) explainMiss(c *fiber.Ctx, ns, backend string, key cachekey.Key, displayName string, components map[string]string) explain.Explanation {
	st := s.cfg.Stats
	if st == nil {
		return explain.Explanation{Reason: explain.ReasonUnavailable,
			Summary: "This server keeps no statistics, so it cannot compare the signature with stored entries."}
	}
	ex := st.Explain(ns, backend, components)
	st.RecordMiss(stats.Miss{Namespace: ns, Backend: backend, Key: key.String(), DisplayName: displayName, Run: c.Get(HeaderRun), Explanation: ex})
	return ex
}

// leaseCounts returns the leases held and waited for.
func (s *Server) leaseCounts() LeaseCounts {
	if s.leases == nil {
		return LeaseCounts{}
	}
	h, w := s.leases.Counts()
	return LeaseCounts{Held: int64(h), Waiting: int64(w)}
}

// initStats wires the configured stats: /metrics collectors fed from the
// persisted statistics (replacing the process-lifetime lookup counter) and,
// in the background, the miss-explanation index seeded from the store.
func (s *Server) initStats() error {
	st := s.cfg.Stats
	if st == nil {
		return nil
	}
	// The persisted counters replace the process-lifetime
	// cachesvc_lookups_total{result}: /metrics gathers the server's registry
	// without that family, plus a registry of the stats collector. (A
	// Prometheus registry cannot re-register a name with other labels, even
	// after Unregister.)
	statsReg := prometheus.NewRegistry()
	if err := statsReg.Register(&statsCollector{st: st}); err != nil {
		return fmt.Errorf("register stats metrics: %w", err)
	}
	base := s.cfg.Registry
	withoutLookups := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := base.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if mf.GetName() != "cachesvc_lookups_total" {
				out = append(out, mf)
			}
		}
		return out, err
	})
	s.metrics.handler = adaptor.HTTPHandler(promhttp.HandlerFor(prometheus.Gatherers{withoutLookups, statsReg}, promhttp.HandlerOpts{}))
	go s.seedExplainIndex(st)
	return nil
}

// seedExplainIndex indexes the components of stored entries so that misses
// right after a restart can be explained. The index bounds what it keeps.
func (s *Server) seedExplainIndex(st *stats.Stats) {
	idx := st.Index()
	n := 0
	err := s.cfg.Store.Walk(s.baseCtx, "", func(m store.Meta) bool {
		if len(m.Components) > 0 {
			idx.Add(m.Namespace, stats.BackendOrUnknown(m.Backend), m.Key.String(), m.Name, m.Created, m.Components)
			n++
		}
		return true
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("seed miss explanations from the store", "err", err)
		return
	}
	s.log.Debug("seeded miss explanations", "entries", n)
}

// maxMetricNamespaces bounds the namespace label of the stats metrics; the
// rest are summed under "_other".
const maxMetricNamespaces = 20

// statsCollector exports the persisted statistics at scrape time, so that
// counters continue across restarts. Namespace labels are admitted first
// come, up to maxMetricNamespaces, so a series never moves between labels.
type statsCollector struct {
	st *stats.Stats

	mu       sync.Mutex
	admitted map[string]bool
}

var (
	descLookups = prometheus.NewDesc("cachesvc_lookups_total",
		"Entry lookups by namespace (bounded; the rest under _other), backend and result (hit or miss). Persisted across restarts.",
		[]string{"namespace", "backend", "result"}, nil)
	descSaved = prometheus.NewDesc("cachesvc_compile_seconds_saved_total",
		"Compile seconds saved by hits (each hit credits its entry's compile time), by namespace and backend. Persisted across restarts.",
		[]string{"namespace", "backend"}, nil)
	descWrites = prometheus.NewDesc("cachesvc_entries_stored_total",
		"New entries stored, by namespace and backend. Persisted across restarts.",
		[]string{"namespace", "backend"}, nil)
	descServed = prometheus.NewDesc("cachesvc_lookup_bytes_total",
		"Entry bytes by direction: out (served on hits) or in (stored), by namespace and backend. Persisted across restarts.",
		[]string{"namespace", "backend", "direction"}, nil)
	descReasons = prometheus.NewDesc("cachesvc_miss_explanations_total",
		"Explained misses by reason: the components that differ from the nearest stored entry, e.g. xla_flags.",
		[]string{"reason"}, nil)
)

// Describe sends the descriptors.
func (sc *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descSaved, descWrites, descServed, descReasons} {
		ch <- d
	}
}

// Collect reads one snapshot and sends every metric.
func (sc *statsCollector) Collect(ch chan<- prometheus.Metric) {
	snap := sc.st.Snapshot(stats.SnapshotOptions{MaxRuns: 1, MaxTopEntries: 1})
	type nb struct{ ns, backend string }
	sums := map[nb]*stats.Totals{}
	// Admit namespaces busiest first on the first scrape, then first come.
	nss := append([]stats.NamespaceTotals(nil), snap.Namespaces...)
	sort.SliceStable(nss, func(i, j int) bool { return nss[i].Lookups > nss[j].Lookups })
	sc.mu.Lock()
	if sc.admitted == nil {
		sc.admitted = map[string]bool{}
	}
	for _, n := range nss {
		label := n.Namespace
		if !sc.admitted[label] {
			if len(sc.admitted) < maxMetricNamespaces && label != stats.Other {
				sc.admitted[label] = true
			} else {
				label = stats.Other
			}
		}
		for _, b := range n.Backends {
			k := nb{label, b.Backend}
			t := sums[k]
			if t == nil {
				t = &stats.Totals{}
				sums[k] = t
			}
			t.Hits += b.Hits
			t.Misses += b.Misses
			t.Writes += b.Writes
			t.BytesIn += b.BytesIn
			t.BytesOut += b.BytesOut
			t.CompileSecondsSaved += b.CompileSecondsSaved
		}
	}
	sc.mu.Unlock()
	for k, t := range sums {
		ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(t.Hits), k.ns, k.backend, "hit")
		ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(t.Misses), k.ns, k.backend, "miss")
		ch <- prometheus.MustNewConstMetric(descSaved, prometheus.CounterValue, t.CompileSecondsSaved, k.ns, k.backend)
		ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(t.Writes), k.ns, k.backend)
		ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(t.BytesOut), k.ns, k.backend, "out")
		ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(t.BytesIn), k.ns, k.backend, "in")
	}
	for _, r := range snap.MissReasons {
		ch <- prometheus.MustNewConstMetric(descReasons, prometheus.CounterValue, float64(r.Count), r.Reason)
	}
}
