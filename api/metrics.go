package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/wire"
)

// withSeries creates vec's series for each of the values of its one label,
// so that they are exported as 0 before their first event: a rate, or an
// alert on an increase, then sees that first event (a series that appears
// with the value 1 shows no increase).
func withSeries(vec *prometheus.CounterVec, values ...string) *prometheus.CounterVec {
	for _, v := range values {
		vec.WithLabelValues(v)
	}
	return vec
}

// durationBuckets are the request-duration histogram's bounds: from 100 µs
// (a hot small GET answers in about that) to MaxWait, the longest ?wait=
// long poll, so that long polls land in a bucket rather than all in +Inf
// (the bounds stopped at 120 s, under the 300 s a poll may wait).
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, MaxWait.Seconds()}

// httpMetrics are the transport's Prometheus instruments: requests by
// route, their durations, and body bytes moved.
type httpMetrics struct {
	requests *prometheus.CounterVec   // route, method, status
	duration *prometheus.HistogramVec // route, method
	// series resolves their children once per route, method and status
	// (httpseries.go).
	series   httpSeries
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	panics   prometheus.Counter
}

// newHTTPMetrics registers the transport metrics, cachesvc_build_info of
// version, a collector of the store's usage (with the per-namespace
// eviction counts persisted in sts) and the Go and process collectors on
// reg.
func newHTTPMetrics(reg *prometheus.Registry, st Store, sts *stats.Stats, version string) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_http_requests_total",
			Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cachesvc_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern and method, including streaming the body.",
			Buckets: durationBuckets,
		}, []string{"route", "method"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_bytes_in_total",
			Help: "Request body bytes received on entry uploads and signatures, including uploads that were refused or cut short.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_bytes_out_total",
			Help: "Entry bytes sent in response bodies (GET, lookup, batch), as written to the network.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_http_handler_panics_total",
			Help: "Requests whose handler, or streamed response body, panicked (a bug): each answered 500 or was cut short, and was logged with its stack; the server kept serving.",
		}),
	}
	m.series = httpSeries{requests: m.requests, duration: m.duration}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cachesvc_build_info",
		Help:        "Always 1; its labels name this server's version and the Go version it was built with (a fleet on mixed versions shows more than one).",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	build.Set(1)
	for _, c := range []prometheus.Collector{
		m.requests, m.duration, m.bytesIn, m.bytesOut, m.panics, build,
		&usageCollector{st: st, stats: sts, namespaces: labelLimiter{max: maxUsageNamespaces}},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// metricsHandler serves the registry in the Prometheus text format.
func (s *Server) metricsHandler() fiber.Handler {
	reg := s.cfg.Registry
	return adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}

// usageCollector exports the store's Usage at scrape time, the usage of
// each namespace included (nsmetrics.go), its eviction counts the
// persisted ones of stats.
type usageCollector struct {
	st         Store
	stats      *stats.Stats
	namespaces labelLimiter
}

var (
	descStoreBytes   = prometheus.NewDesc("cachesvc_store_bytes", "Logical bytes of unique blobs in the store (on a fleet replica: the shared tier's blobs plus entry records, where entries of at most 64 KiB keep their bytes).", nil, nil)
	descStoreDisk    = prometheus.NewDesc("cachesvc_store_disk_bytes", "Disk space the store's files occupy (allocated blocks, Badger's fixed files included); above cachesvc_store_bytes by what value-log GC has not reclaimed yet. On a fleet replica, its hot tier's: cachesvc_hot_tier_disk_bytes (the shared tier has no disk of the replica's).", nil, nil)
	descStoreMax     = prometheus.NewDesc("cachesvc_store_max_bytes", "The store's size limit in bytes; 0 means unlimited (always on a fleet replica, whose store figures are the shared tier's: see cachesvc_hot_tier_max_bytes).", nil, nil)
	descStoreEntries = prometheus.NewDesc("cachesvc_store_entries", "Entries in the store.", nil, nil)
	descStoreBlobs   = prometheus.NewDesc("cachesvc_store_blobs", "Unique blobs in the store.", nil, nil)
	descStoreListed  = prometheus.NewDesc("cachesvc_store_listed_timestamp_seconds", "When this fleet replica last finished listing the shared tier's bucket, which cachesvc_store_bytes, _entries and _blobs count (plus its own writes since); 0 until the first listing, while those three are not exported.", nil, nil)
	descEvictions    = prometheus.NewDesc("cachesvc_evictions_total", "Entries the store removed on its own: evicted to make room (--max-size, a namespace's quota) or expired (max_idle, max_age); cachesvc_namespace_evictions_total splits them. On a fleet replica, its hot tier's: cachesvc_hot_tier_evictions_total (the shared tier evicts nothing).", nil, nil)
	descIntegrity    = prometheus.NewDesc("cachesvc_integrity_failures_total", "Stored chunks that failed their checksum; each quarantines its entry.", nil, nil)
	descQuarantined  = prometheus.NewDesc("cachesvc_quarantined_entries", "Entries quarantined now (reported as unloadable or quarantined by an admin): never served, restorable. On a fleet replica, those of its hot tier: cachesvc_hot_tier_quarantined_entries.", nil, nil)
	descQuarantines  = prometheus.NewDesc("cachesvc_quarantines_total", "Entries quarantined since the store opened, by cause: reports (enough distinct clients could not load it), admin, corrupt (a chunk failed its checksum).", []string{"cause"}, nil)
)

// A fleet replica's own hot tier (Badger), beside the shared tier's
// figures above; not exported by a server without a shared tier.
var (
	descHotBytes   = prometheus.NewDesc("cachesvc_hot_tier_bytes", "Logical bytes in this fleet replica's hot tier (its Badger store), which --max-size bounds.", nil, nil)
	descHotMax     = prometheus.NewDesc("cachesvc_hot_tier_max_bytes", "This fleet replica's hot tier size limit (--max-size) in bytes; 0 means unlimited.", nil, nil)
	descHotEntries = prometheus.NewDesc("cachesvc_hot_tier_entries", "Entries in this fleet replica's hot tier.", nil, nil)
	// The hot tier's disk use, evictions and quarantined entries are also
	// under the generic names above (the shared tier has none of its own
	// that this replica knows), which stay for the dashboards and alerts
	// that read them; these complete the family, so that a fleet's
	// dashboard reads every hot-tier figure by one prefix.
	descHotDisk        = prometheus.NewDesc("cachesvc_hot_tier_disk_bytes", "Disk space this fleet replica's hot tier's files occupy (as cachesvc_store_disk_bytes); above cachesvc_hot_tier_bytes by what value-log GC has not reclaimed yet.", nil, nil)
	descHotEvictions   = prometheus.NewDesc("cachesvc_hot_tier_evictions_total", "Entries this fleet replica's hot tier removed on its own since it opened, evicted or expired (as cachesvc_evictions_total).", nil, nil)
	descHotQuarantined = prometheus.NewDesc("cachesvc_hot_tier_quarantined_entries", "Entries quarantined now in this fleet replica's hot tier (as cachesvc_quarantined_entries).", nil, nil)
)

// Describe sends the store metrics' descriptors.
func (u *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreBytes, descStoreDisk, descStoreMax, descStoreEntries, descStoreBlobs, descStoreListed, descEvictions, descIntegrity, descQuarantined, descQuarantines,
		descHotBytes, descHotMax, descHotEntries, descHotDisk, descHotEvictions, descHotQuarantined} {
		ch <- d
	}
	for _, d := range namespaceDescs {
		ch <- d
	}
}

// Collect reads the store's Usage once and sends every metric.
func (u *usageCollector) Collect(ch chan<- prometheus.Metric) {
	us := u.st.Usage()
	// A shared tier not listed yet has no count: its sizes are left out
	// (absent, not a 0 that graphs as an emptied bucket), and the listing
	// timestamp says since when they are known.
	if us.Uncounted == "" {
		ch <- prometheus.MustNewConstMetric(descStoreBytes, prometheus.GaugeValue, float64(us.Bytes))
		ch <- prometheus.MustNewConstMetric(descStoreEntries, prometheus.GaugeValue, float64(us.Entries))
		ch <- prometheus.MustNewConstMetric(descStoreBlobs, prometheus.GaugeValue, float64(us.Blobs))
	}
	if us.Tier == wire.StoreTierShared {
		var listed float64
		if !us.ListedAt.IsZero() {
			listed = float64(us.ListedAt.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descStoreListed, prometheus.GaugeValue, listed)
	}
	ch <- prometheus.MustNewConstMetric(descStoreDisk, prometheus.GaugeValue, float64(us.DiskBytes))
	ch <- prometheus.MustNewConstMetric(descStoreMax, prometheus.GaugeValue, float64(us.MaxBytes))
	ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(us.Evictions))
	ch <- prometheus.MustNewConstMetric(descIntegrity, prometheus.CounterValue, float64(us.IntegrityFailures))
	ch <- prometheus.MustNewConstMetric(descQuarantined, prometheus.GaugeValue, float64(us.Quarantined))
	ch <- prometheus.MustNewConstMetric(descQuarantines, prometheus.CounterValue, float64(us.QuarantinesReported), "reports")
	ch <- prometheus.MustNewConstMetric(descQuarantines, prometheus.CounterValue, float64(us.QuarantinesAdmin), "admin")
	ch <- prometheus.MustNewConstMetric(descQuarantines, prometheus.CounterValue, float64(us.IntegrityFailures), "corrupt")
	if h := us.Hot; h != nil {
		ch <- prometheus.MustNewConstMetric(descHotBytes, prometheus.GaugeValue, float64(h.Bytes))
		ch <- prometheus.MustNewConstMetric(descHotMax, prometheus.GaugeValue, float64(h.MaxBytes))
		ch <- prometheus.MustNewConstMetric(descHotEntries, prometheus.GaugeValue, float64(h.Entries))
		ch <- prometheus.MustNewConstMetric(descHotDisk, prometheus.GaugeValue, float64(h.DiskBytes))
		ch <- prometheus.MustNewConstMetric(descHotEvictions, prometheus.CounterValue, float64(h.Evictions))
		ch <- prometheus.MustNewConstMetric(descHotQuarantined, prometheus.GaugeValue, float64(h.Quarantined))
	}
	withPersistedEvictions(us.Namespaces, byReason(u.stats.NamespaceEvictions())) // nsevictions.go
	collectNamespaces(ch, us.Namespaces, &u.namespaces)
}

// middleware wraps every request: it gives the handler a context that
// Shutdown can cancel, renders handler errors through errorHandler (so the
// status is known here), records metrics and logs the request.
func (s *Server) middleware(c *fiber.Ctx) error {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	start := time.Now()
	c.SetUserContext(s.baseCtx)
	s.resolveClient(c)
	s.setRequestID(c.Context()) // before the handler: a streamed body's headers leave with it

	err := ambiguousFraming(c)
	if err != nil {
		// Its body, read by the wrong length, must not be followed
		// by another request on this connection.
		c.Context().SetConnectionClose()
	} else {
		err = c.Next()
	}
	if s.draining.Load() {
		// Move kept-alive clients off this server while it still answers.
		c.Context().SetConnectionClose()
	}
	if err != nil && !routed(c) {
		err = s.unmatched(c, err)
	}
	if err != nil {
		if herr := s.errorHandler(c, err); herr != nil {
			return herr
		}
	}
	closeIfBodyUnread(c)

	route := unmatchedRoute
	if routed(c) {
		route = c.Route().Path
	}
	s.recordRequest(c, route, methodName(c.Method()), start, err)
	return nil
}

// recordRequest counts a request that was answered in the request metrics
// and logs it as one "request" line: the middleware's every request, and
// the ones answered before fiber routes them (catchUnknownMethods). more
// are attributes the line adds.
func (s *Server) recordRequest(c *fiber.Ctx, route, method string, start time.Time, err error, more ...slog.Attr) {
	status := c.Response().StatusCode()
	elapsed := time.Since(start)
	s.http.series.observe(route, method, status, elapsed)

	code := ""
	if err != nil {
		code = toError(err).Code
	}
	level := slog.LevelInfo
	switch {
	case isProbe(c):
		// A 503 from /readyz is the answer a probe asks for while the
		// server starts, drains or its plugins compile (each logged once
		// where it happens); at ERROR, every probe of a rolling restart
		// paged as a server failure.
		level = slog.LevelDebug
	case status >= 500:
		level = failureLevel(status, code)
	case route == "/metrics":
		level = slog.LevelDebug
	}
	if status >= 500 && outageCodes[code] && level > slog.LevelInfo {
		// One line per outage code per interval (outagelog.go); the
		// others at INFO, like the requests answered, with their ids.
		if demoted, ok := s.outages.due(code, time.Now()); !ok {
			level = slog.LevelInfo
		} else if demoted > 0 {
			more = append(more, slog.Int("similar_since_last_log", demoted))
		}
	}
	if !s.log.Enabled(c.UserContext(), level) {
		return // at --log-level warn (run.sh) a 4 KiB GET formats nothing
	}
	attrs := []slog.Attr{
		slog.String("method", method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		// Behind a reverse proxy the peer is the proxy: name the client
		// it forwarded for (--trusted-proxies), as the limits count it.
		slog.String("client", clientAddr(c)),
		slog.String("request_id", s.requestID(c)),
	}
	if r := reqOf(c); r.Namespace != "" {
		attrs = append(attrs, slog.String("namespace", r.Namespace))
		if r.HasKey {
			attrs = append(attrs, slog.String("key", r.Key.String()))
		}
	}
	if err != nil {
		attrs = append(attrs, slog.String("code", code), slog.String("err", err.Error()))
	}
	attrs = append(attrs, more...)
	s.log.LogAttrs(c.UserContext(), level, "request", attrs...)
}

// unmatchedRoute is the route label of a request that matched no route.
const unmatchedRoute = "unmatched"

// otherMethod is the method label of every request whose method fiber does
// not know (such a method is any token a client sends, and a label per
// value would grow the metrics without bound), or whose method is lost (a
// request fasthttp reset after failing to read its body).
const otherMethod = "_other"

// methodName returns m as a string that does not alias fiber's reused
// buffers: a constant for the usual methods (no allocation per request).
func methodName(m string) string {
	for _, known := range [...]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if m == known {
			return known
		}
	}
	return strings.Clone(m)
}

// routedKey marks, in fiber Locals, a request that reached a declared
// route's handlers (fiber's own Route() of an unmatched request looks like
// a real one).
const routedKey = "cachesvc.routed"

// isProbe reports whether c is a health or readiness probe (/healthz,
// /readyz), whose 503s say "not now", not that a request failed.
func isProbe(c *fiber.Ctx) bool {
	if !routed(c) {
		return false
	}
	p := c.Route().Path
	return p == "/healthz" || p == "/readyz"
}

// routed reports whether the request matched a declared route.
func routed(c *fiber.Ctx) bool {
	ok, _ := c.Locals(routedKey).(bool)
	return ok
}
