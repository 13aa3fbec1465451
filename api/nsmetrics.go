package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// maxUsageNamespaces bounds the namespace label of the per-namespace usage
// metrics: namespaces are admitted first come (so a series never moves
// between labels), and the usage of the rest is summed under "_other",
// which has no quota series.
const maxUsageNamespaces = 64

// otherNamespace is the label of namespaces past maxUsageNamespaces.
const otherNamespace = "_other"

// evictionReasons are the reason label values of
// cachesvc_namespace_evictions_total, every one exported for every
// namespace.
var evictionReasons = []string{store.ReasonSize, store.ReasonQuota, store.ReasonIdle, store.ReasonAge}

var (
	descNSBytes = prometheus.NewDesc("cachesvc_namespace_bytes",
		"Sum of the sizes of a namespace's entries in the hot store (a blob shared by two namespaces counts in each), by namespace (bounded; the rest under _other).",
		[]string{"namespace"}, nil)
	descNSEntries = prometheus.NewDesc("cachesvc_namespace_entries",
		"Entries of a namespace in the hot store, by namespace (bounded; the rest under _other).",
		[]string{"namespace"}, nil)
	descNSQuotaBytes = prometheus.NewDesc("cachesvc_namespace_quota_bytes",
		"A namespace's max_bytes quota (serve --namespaces); 0 means none.",
		[]string{"namespace"}, nil)
	descNSQuotaEntries = prometheus.NewDesc("cachesvc_namespace_quota_entries",
		"A namespace's max_entries quota (serve --namespaces); 0 means none.",
		[]string{"namespace"}, nil)
	descNSEvictions = prometheus.NewDesc("cachesvc_namespace_evictions_total",
		"Entries the store removed on its own, by namespace and reason: size (--max-size), quota (max_bytes or max_entries), idle (max_idle) or age (max_age); persisted with the statistics, so a restart does not reset it.",
		[]string{"namespace", "reason"}, nil)
)

// namespaceDescs are the per-namespace usage metrics' descriptors.
var namespaceDescs = []*prometheus.Desc{descNSBytes, descNSEntries, descNSQuotaBytes, descNSQuotaEntries, descNSEvictions}

// collectNamespaces sends the per-namespace usage metrics of nss, labels
// admitted by l.
func collectNamespaces(ch chan<- prometheus.Metric, nss []wire.NamespaceUsage, l *labelLimiter) {
	other := wire.NamespaceUsage{Namespace: otherNamespace, EvictionsByReason: map[string]int64{}}
	haveOther := false
	for _, u := range nss {
		if l.admit(u.Namespace) == otherNamespace {
			haveOther = true
			other.Bytes += u.Bytes
			other.Entries += u.Entries
			for r, n := range u.EvictionsByReason {
				other.EvictionsByReason[r] += n
			}
			continue
		}
		sendNamespace(ch, u, true)
	}
	if haveOther {
		sendNamespace(ch, other, false)
	}
}

// sendNamespace sends one namespace's series (its quotas when withQuota).
func sendNamespace(ch chan<- prometheus.Metric, u wire.NamespaceUsage, withQuota bool) {
	ch <- prometheus.MustNewConstMetric(descNSBytes, prometheus.GaugeValue, float64(u.Bytes), u.Namespace)
	ch <- prometheus.MustNewConstMetric(descNSEntries, prometheus.GaugeValue, float64(u.Entries), u.Namespace)
	if withQuota {
		ch <- prometheus.MustNewConstMetric(descNSQuotaBytes, prometheus.GaugeValue, float64(u.MaxBytes), u.Namespace)
		ch <- prometheus.MustNewConstMetric(descNSQuotaEntries, prometheus.GaugeValue, float64(u.MaxEntries), u.Namespace)
	}
	for _, r := range evictionReasons {
		ch <- prometheus.MustNewConstMetric(descNSEvictions, prometheus.CounterValue, float64(u.EvictionsByReason[r]), u.Namespace, r)
	}
}

// NamespacesReloads counts reloads of the serve --namespaces file (on
// SIGHUP) by result, cachesvc_namespaces_reloads_total{result}. Register
// it on the server's registry (Server.Registry). It is safe for concurrent
// use.
type NamespacesReloads struct {
	reloads *prometheus.CounterVec
}

// NewNamespacesReloads returns an unregistered reload counter.
func NewNamespacesReloads() *NamespacesReloads {
	return &NamespacesReloads{reloads: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cachesvc_namespaces_reloads_total",
		Help: "Reloads of the --namespaces file (on SIGHUP) by result: ok (its quotas are in force) or failed (the quotas in force were kept).",
	}, []string{"result"}), "ok", "failed")}
}

// Observe counts one reload; err is its error (nil on success).
func (m *NamespacesReloads) Observe(err error) {
	if err != nil {
		m.reloads.WithLabelValues("failed").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}

// Describe sends the descriptors.
func (m *NamespacesReloads) Describe(ch chan<- *prometheus.Desc) { m.reloads.Describe(ch) }

// Collect sends the metrics.
func (m *NamespacesReloads) Collect(ch chan<- prometheus.Metric) { m.reloads.Collect(ch) }
