package api

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// TierMetrics exports what a replica's tiered store does on its shared tier
// (S3) under Prometheus conventions: per operation (shared_get, shared_put,
// fill) cachesvc_shared_tier_duration_seconds{op},
// cachesvc_shared_tier_bytes_total{op} and
// cachesvc_shared_tier_errors_total{op}; cachesvc_shared_tier_misses_total;
// cachesvc_tier_events_total{event} (fill_skipped, queued,
// upload_dropped); and, read at scrape time from the store,
// cachesvc_tier_gets_total{result} (hot_hit, shared_fetch, collapsed, miss),
// cachesvc_shared_tier_up, cachesvc_upload_queue_entries,
// cachesvc_upload_queue_bytes, cachesvc_upload_queue_oldest_seconds and
// cachesvc_upload_retries_total. Set
// Observe as tiered.Config.Observe, then Watch the store, and register it on
// the server's registry. It is safe for concurrent use.
type TierMetrics struct {
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	errs     *prometheus.CounterVec
	misses   prometheus.Counter
	events   *prometheus.CounterVec
	st       *tiered.Store
}

// NewTierMetrics returns unregistered tier metrics.
func NewTierMetrics() *TierMetrics {
	return &TierMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cachesvc_shared_tier_duration_seconds",
			Help:    "Duration of operations on the shared tier (S3) by op: shared_get (to the last byte), shared_put, fill (of the hot tier from a spool).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_shared_tier_bytes_total",
			Help: "Entry bytes moved by shared-tier operations, by op (shared_get, shared_put, fill).",
		}, []string{"op"}),
		// At 0 from the start, as every counter of a fixed label set
		// (withSeries): an alert on the first error sees it.
		errs: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_shared_tier_errors_total",
			Help: "Failed shared-tier operations by op (misses are not errors).",
		}, []string{"op"}), string(tiered.EventSharedGet), string(tiered.EventSharedPut), string(tiered.EventFill)),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_shared_tier_misses_total",
			Help: "Reads of entries the shared tier does not hold either.",
		}),
		events: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_tier_events_total",
			Help: "Tier events: fill_skipped (hot miss served without filling the hot tier: spool budget spent, or the entry is larger than the hot tier), queued (upload accepted into the write-behind queue), upload_dropped (queued entry given up on).",
		}, []string{"event"}), string(tiered.EventFillSkipped), string(tiered.EventQueued), string(tiered.EventUploadDropped)),
	}
}

// Observe records one tiered-store event; it has the signature of
// tiered.Config.Observe.
func (m *TierMetrics) Observe(e tiered.Event) {
	op := string(e.Kind)
	switch e.Kind {
	case tiered.EventSharedGet, tiered.EventSharedPut, tiered.EventFill:
		switch {
		case errors.Is(e.Err, store.ErrNotFound):
			m.misses.Inc()
			return
		case e.Err != nil:
			m.errs.WithLabelValues(op).Inc()
			return
		}
		m.duration.WithLabelValues(op).Observe(e.Duration.Seconds())
		m.bytes.WithLabelValues(op).Add(float64(e.Bytes))
	default:
		m.events.WithLabelValues(op).Inc()
	}
}

// Watch makes the scrape-time metrics read st.
func (m *TierMetrics) Watch(st *tiered.Store) { m.st = st }

var (
	descTierGets    = prometheus.NewDesc("cachesvc_tier_gets_total", "Entry reads by where they were served from: hot_hit (hot tier), shared_fetch (fetched from the shared tier), collapsed (joined another read's fetch), miss (neither tier).", []string{"result"}, nil)
	descSharedUp    = prometheus.NewDesc("cachesvc_shared_tier_up", "1 while the shared tier answers (last request or probe), 0 while it cannot be reached.", nil, nil)
	descQueueLen    = prometheus.NewDesc("cachesvc_upload_queue_entries", "Entries waiting in the write-behind upload queue.", nil, nil)
	descQueueBytes  = prometheus.NewDesc("cachesvc_upload_queue_bytes", "Bytes waiting in the write-behind upload queue.", nil, nil)
	descQueueOldest = prometheus.NewDesc("cachesvc_upload_queue_oldest_seconds", "Age of the oldest entry in the write-behind upload queue; 0 when empty.", nil, nil)
	// The uploaders log a spell of failures once, not each retry: this
	// counts them, those that never reached the shared tier (the queue's
	// directory gone) included, which cachesvc_shared_tier_errors_total
	// does not.
	descRetries = prometheus.NewDesc("cachesvc_upload_retries_total", "Failed uploads from the write-behind queue that are retried (the shared tier unavailable, the queue's directory gone).", nil, nil)
)

// Describe sends the descriptors.
func (m *TierMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []prometheus.Collector{m.duration, m.bytes, m.errs, m.misses, m.events} {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descTierGets, descSharedUp, descQueueLen, descQueueBytes, descQueueOldest, descRetries} {
		ch <- d
	}
}

// Collect sends the metrics.
func (m *TierMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []prometheus.Collector{m.duration, m.bytes, m.errs, m.misses, m.events} {
		c.Collect(ch)
	}
	if m.st == nil {
		return
	}
	s := m.st.Stats()
	for result, n := range map[string]int64{"hot_hit": s.HotHits, "shared_fetch": s.SharedFetches, "collapsed": s.Collapsed, "miss": s.Misses} {
		ch <- prometheus.MustNewConstMetric(descTierGets, prometheus.CounterValue, float64(n), result)
	}
	up := 0.0
	if m.st.SharedState().Reachable {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descSharedUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descQueueLen, prometheus.GaugeValue, float64(s.QueueEntries))
	ch <- prometheus.MustNewConstMetric(descQueueBytes, prometheus.GaugeValue, float64(s.QueueBytes))
	oldest := 0.0
	if !s.OldestQueued.IsZero() {
		oldest = time.Since(s.OldestQueued).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descQueueOldest, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(s.UploadRetries))
}
