package api

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpSeries holds the children of the request counter and the duration
// histogram for each route, method and status, resolved on first use:
// WithLabelValues per request (label validation, hashing, a locked map
// lookup, the status formatted) was about 4% of a small GET's CPU. The
// series are the ones the vectors hold anyway, created at the same moment
// (the first such request), so /metrics is unchanged.
//
// Bounded as the vectors are: routes come from the route table (or
// unmatchedRoute), methods from the ones fiber accepts, statuses from those
// the server answers with.
type httpSeries struct {
	requests *prometheus.CounterVec   // route, method, status
	duration *prometheus.HistogramVec // route, method

	mu sync.RWMutex
	m  map[seriesKey]seriesPair
}

type seriesKey struct {
	route, method string
	status        int
}

type seriesPair struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// observe counts one request and its duration.
func (h *httpSeries) observe(route, method string, status int, d time.Duration) {
	k := seriesKey{route, method, status}
	h.mu.RLock()
	p, ok := h.m[k]
	h.mu.RUnlock()
	if !ok {
		p = seriesPair{
			requests: h.requests.WithLabelValues(route, method, strconv.Itoa(status)),
			duration: h.duration.WithLabelValues(route, method),
		}
		h.mu.Lock()
		if h.m == nil {
			h.m = make(map[seriesKey]seriesPair)
		}
		h.m[k] = p
		h.mu.Unlock()
	}
	p.requests.Inc()
	p.duration.Observe(d.Seconds())
}
