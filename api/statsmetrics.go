package api

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// initStats exports the persisted statistics on /metrics and, in the
// background, seeds the miss-explanation index and the namespaces the stats
// track from the store.
func (s *Server) initStats() error {
	if err := s.cfg.Registry.Register(&statsCollector{st: s.cfg.Stats}); err != nil {
		return fmt.Errorf("register stats metrics: %w", err)
	}
	s.cfg.Stats.AdmitNamespace(cachekey.DefaultNamespace)
	go s.seedStats(s.cfg.Stats)
	return nil
}

// seedStats admits every namespace that holds entries into the statistics,
// and the backends of the plugins and of stored entries (a miss admits no
// backend: stats.Lookup), and indexes the components of stored entries, so
// that misses right after a restart can be explained. The index bounds what
// it keeps. It runs beside the start: the plugins' list waits for them to
// compile.
func (s *Server) seedStats(st *stats.Stats) {
	if s.cfg.Keyer != nil && s.cfg.Keyer.Host() != nil {
		for _, b := range s.cfg.Keyer.Host().Backends() {
			st.AdmitBackend(b)
		}
	}
	n := 0
	last, lastBackend := "", ""
	err := s.cfg.Seed.Walk(s.baseCtx, "", func(m store.Meta) bool {
		if m.Namespace != last {
			st.AdmitNamespace(m.Namespace)
			last = m.Namespace
		}
		if m.Backend != lastBackend {
			st.AdmitBackend(m.Backend)
			lastBackend = m.Backend
		}
		if indexEntry(st, m) {
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

// indexEntry adds a stored entry to the index that explains misses, and
// reports whether it did (an entry without components has nothing to
// compare).
func indexEntry(st *stats.Stats, m store.Meta) bool {
	if len(m.Components) == 0 {
		return false
	}
	st.Index().Add(m.Namespace, stats.BackendOrUnknown(m.Backend), m.Key.String(), m.Name, m.Created, m.Components)
	return true
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
	// descWaitHits exports wait_hits, so that a dashboard built on
	// /metrics gets the compiles clients ran (misses minus these), as the
	// stats view's "Compiles run" row does.
	descWaitHits = prometheus.NewDesc("cachesvc_lease_wait_hits_total",
		"Hits of GET ?wait= (a client that missed waited out another's compile lease), by namespace and backend; also counted in cachesvc_lookups_total{result=\"hit\"}. Misses minus these are the compiles clients ran. Persisted across restarts.",
		[]string{"namespace", "backend"}, nil)
	descReasons = prometheus.NewDesc("cachesvc_miss_explanations_total",
		"Explained misses by reason: the components that differ from the nearest stored entry, e.g. xla_flags.",
		[]string{"reason"}, nil)
	descIndexEntries = prometheus.NewDesc("cachesvc_explain_index_entries",
		"Stored entries whose components the miss explanations compare with (bounded; see IndexConfig in explain).",
		nil, nil)
	descIndexDropped = prometheus.NewDesc("cachesvc_explain_index_dropped_total",
		"Entries that left the miss-explanation index at its bound, least recently written first: their groups' explanations are approximate.",
		nil, nil)
	// descStatsRuns and descRunEvictions show the run table at its bound
	// (stats.Config.MaxRuns): a steady rise of evictions is a busy CI (or
	// a client making up run ids) cycling runs through it.
	descStatsRuns = prometheus.NewDesc("cachesvc_stats_runs",
		fmt.Sprintf("Run ids (X-Cachesvc-Run) the statistics count under their own name; at the bound (%d) a new run takes the slot of the least recently seen run of the namespace holding the most runs.", stats.DefaultMaxRuns),
		nil, nil)
	descRunEvictions = prometheus.NewDesc("cachesvc_stats_run_evictions_total",
		"Runs whose statistics were folded into the run _other to free a slot for a new run id, the run table being full. Persisted across restarts, as the run table and _other are (runs folded after 30 idle days are not counted).",
		nil, nil)
	// descUnsavedDropped shows the one loss a statistics directory that
	// cannot be written to causes: per-minute series past the in-memory
	// bound (stats.Config.MaxUnsavedMinutes).
	descUnsavedDropped = prometheus.NewDesc("cachesvc_stats_unsaved_samples_dropped_total",
		fmt.Sprintf("Per-minute samples of the statistics series (one a minute) dropped from memory because the statistics directory could not be written to for longer than the bound (%d minutes by default); totals, runs and top entries keep every count. Since start.", stats.DefaultMaxUnsavedMinutes),
		nil, nil)
)

// Describe sends the descriptors.
func (sc *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descSaved, descWrites, descServed, descWaitHits, descReasons, descIndexEntries, descIndexDropped,
		descStatsRuns, descRunEvictions, descUnsavedDropped} {
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
			t.WaitHits += b.WaitHits
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
		ch <- prometheus.MustNewConstMetric(descWaitHits, prometheus.CounterValue, float64(t.WaitHits), k.ns, k.backend)
		ch <- prometheus.MustNewConstMetric(descSaved, prometheus.CounterValue, t.CompileSecondsSaved, k.ns, k.backend)
		ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(t.Writes), k.ns, k.backend)
		ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(t.BytesOut), k.ns, k.backend, "out")
		ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(t.BytesIn), k.ns, k.backend, "in")
	}
	for _, r := range snap.MissReasons {
		ch <- prometheus.MustNewConstMetric(descReasons, prometheus.CounterValue, float64(r.Count), r.Reason)
	}
	idx := sc.st.Index()
	ch <- prometheus.MustNewConstMetric(descIndexEntries, prometheus.GaugeValue, float64(idx.Entries()))
	ch <- prometheus.MustNewConstMetric(descIndexDropped, prometheus.CounterValue, float64(idx.Dropped()))
	ch <- prometheus.MustNewConstMetric(descStatsRuns, prometheus.GaugeValue, float64(sc.st.Runs()))
	ch <- prometheus.MustNewConstMetric(descRunEvictions, prometheus.CounterValue, float64(sc.st.RunEvictions()))
	ch <- prometheus.MustNewConstMetric(descUnsavedDropped, prometheus.CounterValue, float64(sc.st.UnsavedMinutesDropped()))
}
