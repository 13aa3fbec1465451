package api

// routes registers every route: one line per route group. Each group's
// handlers live in their own file.
func (s *Server) routes() {
	a := s.app

	// Health and metrics (health.go, metrics.go).
	a.Get("/healthz", s.handleHealthz)
	a.Get("/readyz", s.handleReadyz)
	a.Get("/metrics", s.handleMetrics)

	// Totals for the dashboard (stats.go).
	a.Get("/v1/stats", s.handleStats)

	// Entries by key (entries.go).
	// HEAD before GET: fiber's Get also registers HEAD, first match wins.
	a.Head("/v1/:ns/entries/:key", s.handleHeadEntry)
	a.Get("/v1/:ns/entries/:key", s.handleGetEntry)
	a.Put("/v1/:ns/entries/:key", s.handlePutEntry)
	a.Delete("/v1/:ns/entries/:key", s.handleDeleteEntry)
}
