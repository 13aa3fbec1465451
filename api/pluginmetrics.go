package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/plugins"
)

// maxPluginLabels bounds the plugin label of the plugin metrics; further
// plugins are counted under "_other".
const maxPluginLabels = 32

// PluginMetrics exports plugin call durations and failures by plugin,
// cachesvc_plugin_call_duration_seconds{plugin} and
// cachesvc_plugin_failures_total{plugin,kind}, and reloads of the plugin
// directory by result, cachesvc_plugin_reloads_total{result} (see
// ObserveReload). Set its Observe as
// plugins.Config.Observe and register it on the server's registry
// (Server.Registry). It is safe for concurrent use.
type PluginMetrics struct {
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
	reloads  *prometheus.CounterVec
	labels   labelLimiter
}

// NewPluginMetrics returns unregistered plugin metrics.
func NewPluginMetrics() *PluginMetrics {
	return &PluginMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cachesvc_plugin_call_duration_seconds",
			Help:    "Duration of calls into canonicalization plugins (including the wait for an instance), by plugin name@version.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"plugin"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_plugin_failures_total",
			Help: "Failed plugin calls by plugin and kind: rejected (the plugin refused the signature), timeout, trap, memory, output, input_too_large, busy, canceled, closed, unsupported, other; each loaded plugin's series start at 0.",
		}, []string{"plugin", "kind"}),
		reloads: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_plugin_reloads_total",
			Help: "Reloads of the --plugins directory (on SIGHUP) by result: ok (the directory's plugins now serve) or failed (the plugins in force were kept).",
		}, []string{"result"}), "ok", "failed"),
		labels: labelLimiter{max: maxPluginLabels},
	}
}

// ObserveReload counts one reload of the plugin directory; err is its
// error (nil on success).
func (m *PluginMetrics) ObserveReload(err error) {
	if err != nil {
		m.reloads.WithLabelValues("failed").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}

// pluginFailureKinds are the values of the kind label (pluginFailureKind's).
var pluginFailureKinds = []string{"rejected", "timeout", "trap", "memory", "output", "input_too_large", "busy", "canceled", "closed", "unsupported", "other"}

// Loaded exports the failure series of each plugin in ids (name@version),
// one per kind, at 0. A series first exported at a plugin's first failure
// starts at 1, and increase() over it is 0: an alert on an increase (the
// CachesvcPluginFailures alert of scripts/monitoring) missed that failure.
// Call it when plugins load.
func (m *PluginMetrics) Loaded(ids ...string) {
	for _, id := range ids {
		plugin := m.labels.admit(id)
		for _, kind := range pluginFailureKinds {
			m.failures.WithLabelValues(plugin, kind)
		}
	}
}

// Observe records one plugin call; it has the signature of
// plugins.Config.Observe.
func (m *PluginMetrics) Observe(plugin string, d time.Duration, err error) {
	plugin = m.labels.admit(plugin)
	m.duration.WithLabelValues(plugin).Observe(d.Seconds())
	if err != nil {
		m.failures.WithLabelValues(plugin, pluginFailureKind(err)).Inc()
	}
}

// Describe sends the descriptors.
func (m *PluginMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.failures.Describe(ch)
	m.reloads.Describe(ch)
}

// Collect sends the metrics.
func (m *PluginMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.failures.Collect(ch)
	m.reloads.Collect(ch)
}

// pluginFailureKind names a plugin call error for the kind label.
func pluginFailureKind(err error) string {
	for _, k := range []struct {
		err  error
		kind string
	}{
		{plugins.ErrPlugin, "rejected"}, {plugins.ErrTimeout, "timeout"}, {plugins.ErrTrap, "trap"},
		{plugins.ErrMemory, "memory"}, {plugins.ErrOutput, "output"}, {plugins.ErrInputTooLarge, "input_too_large"},
		{plugins.ErrBusy, "busy"}, {plugins.ErrClosed, "closed"}, {context.Canceled, "canceled"}, {context.DeadlineExceeded, "canceled"},
	} {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	if errors.Is(err, plugins.ErrUnsupported) {
		return "unsupported"
	}
	return "other"
}

// labelLimiter admits up to max distinct label values; the rest become
// "_other".
type labelLimiter struct {
	mu   sync.Mutex
	seen map[string]bool
	max  int
}

func (l *labelLimiter) admit(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if len(l.seen) >= l.max {
		return "_other"
	}
	l.seen[v] = true
	return v
}
