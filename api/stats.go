package api

import (
	"sync/atomic"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/store"
)

// totals are the server's process-lifetime counters behind GET /v1/stats.
// (The stats package will persist richer statistics; these stay cheap.)
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

// StatsResponse is the JSON body of GET /v1/stats.
type StatsResponse struct {
	Requests     int64       `json:"requests"`
	Hits         int64       `json:"hits"`
	Misses       int64       `json:"misses"`
	HitRate      float64     `json:"hit_rate"`
	PutsCreated  int64       `json:"puts_created"`
	PutsExisting int64       `json:"puts_existing"`
	PutsRejected int64       `json:"puts_rejected"`
	BytesIn      int64       `json:"bytes_in"`
	BytesOut     int64       `json:"bytes_out"`
	Store        store.Usage `json:"store"`
}

// handleStats serves GET /v1/stats: totals since the process started plus the
// store's usage.
func (s *Server) handleStats(c *fiber.Ctx) error {
	t := s.totals
	r := StatsResponse{
		Requests:     t.requests.Load(),
		Hits:         t.hits.Load(),
		Misses:       t.misses.Load(),
		PutsCreated:  t.putsCreated.Load(),
		PutsExisting: t.putsExisting.Load(),
		PutsRejected: t.putsRejected.Load(),
		BytesIn:      t.bytesIn.Load(),
		BytesOut:     t.bytesOut.Load(),
		Store:        s.cfg.Store.Usage(),
	}
	if n := r.Hits + r.Misses; n > 0 {
		r.HitRate = float64(r.Hits) / float64(n)
	}
	return c.JSON(r)
}

// recordLookup counts an entry lookup as a hit or a miss.
func (s *Server) recordLookup(hit bool) {
	if hit {
		s.totals.hits.Add(1)
		s.metrics.lookups.WithLabelValues("hit").Inc()
		return
	}
	s.totals.misses.Add(1)
	s.metrics.lookups.WithLabelValues("miss").Inc()
}
