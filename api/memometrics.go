package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// otherCodeCounter is what memoMetrics reads (*keying.Keyer).
type otherCodeCounter interface {
	// OtherCodeCounts returns the memo results of other plugin code, by
	// plugin name@version (bounded by the Keyer).
	OtherCodeCounts() map[string]uint64
}

// memoMetrics exports the signature memo's counters of the Keyer,
// read at each scrape.
type memoMetrics struct {
	k         otherCodeCounter
	otherCode *prometheus.Desc
}

func newMemoMetrics(k otherCodeCounter) *memoMetrics {
	return &memoMetrics{k: k, otherCode: prometheus.NewDesc("cachesvc_signature_memo_other_code_total",
		"Signature memo results not used because another build of their plugin computed them (same name@version, "+
			"other wasm code: a plugin file replaced without a version bump), by plugin; the running code keys those signatures again.",
		[]string{"plugin"}, nil)}
}

// Describe sends the descriptors.
func (m *memoMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.otherCode }

// Collect sends the counters.
func (m *memoMetrics) Collect(ch chan<- prometheus.Metric) {
	for plugin, n := range m.k.OtherCodeCounts() {
		ch <- prometheus.MustNewConstMetric(m.otherCode, prometheus.CounterValue, float64(n), plugin)
	}
}
