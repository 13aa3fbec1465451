package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesMethods are the methods whose series httpSeries resolves once; a
// request with another method takes the label lookups.
var seriesMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete}

// httpSeries holds the children of the request counter and the duration
// histogram for each declared route, method and status, resolved on first
// use: WithLabelValues per request (label validation, hashing, a locked map
// lookup, the status formatted) was about 4% of a small GET's CPU. The
// series are the ones the vectors hold anyway, created at the same moment
// (the first such request), so /metrics is unchanged.
//
// Bounded by the route table (routes is filled by register and read-only
// after), the five methods and the status codes the server answers with.
type httpSeries struct {
	requests *prometheus.CounterVec   // route, method, status
	duration *prometheus.HistogramVec // route, method
	routes   map[string]*routeSeries
}

type routeSeries struct {
	methods [len(seriesMethods)]atomic.Pointer[methodSeries]
}

// methodSeries is one route and method: its duration observer and, copied
// on write, its counters by status.
type methodSeries struct {
	duration prometheus.Observer
	mu       sync.Mutex // serializes additions to statuses
	statuses atomic.Pointer[[]statusCounter]
}

type statusCounter struct {
	status  int
	counter prometheus.Counter
}

// addRoute declares a route pattern (as fiber reports it in Route().Path).
// Call it before serving.
func (h *httpSeries) addRoute(route string) {
	if h.routes == nil {
		h.routes = make(map[string]*routeSeries)
	}
	if h.routes[route] == nil {
		h.routes[route] = &routeSeries{}
	}
}

// observe counts one request and its duration.
func (h *httpSeries) observe(route, method string, status int, d time.Duration) {
	ms := h.series(route, method)
	if ms == nil {
		h.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		h.duration.WithLabelValues(route, method).Observe(d.Seconds())
		return
	}
	ms.duration.Observe(d.Seconds())
	ms.counter(h.requests, route, method, status).Inc()
}

// series returns the resolved series of route and method, nil when either
// is not one httpSeries resolves.
func (h *httpSeries) series(route, method string) *methodSeries {
	rs := h.routes[route]
	if rs == nil {
		return nil
	}
	for i, m := range seriesMethods {
		if m != method {
			continue
		}
		if ms := rs.methods[i].Load(); ms != nil {
			return ms
		}
		ms := &methodSeries{duration: h.duration.WithLabelValues(route, method)}
		if rs.methods[i].CompareAndSwap(nil, ms) {
			return ms
		}
		return rs.methods[i].Load()
	}
	return nil
}

// counter returns the request counter of status.
func (ms *methodSeries) counter(requests *prometheus.CounterVec, route, method string, status int) prometheus.Counter {
	if p := ms.statuses.Load(); p != nil {
		for _, sc := range *p {
			if sc.status == status {
				return sc.counter
			}
		}
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var old []statusCounter
	if p := ms.statuses.Load(); p != nil {
		old = *p
		for _, sc := range old {
			if sc.status == status {
				return sc.counter
			}
		}
	}
	c := requests.WithLabelValues(route, method, strconv.Itoa(status))
	next := append(append(make([]statusCounter, 0, len(old)+1), old...), statusCounter{status, c})
	ms.statuses.Store(&next)
	return c
}
