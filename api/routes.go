package api

// routes registers every route: one line per route group. Each group's
// handlers live in their own file.
func (s *Server) routes() {
	a := s.app

	// Health and metrics (health.go, metrics.go).
	a.Get("/healthz", s.handleHealthz)
	a.Get("/readyz", s.handleReadyz)
	a.Get("/metrics", s.handleMetrics)

	// Statistics and explained misses (stats.go); the dashboard (dashboard.go).
	a.Get("/v1/stats", s.handleStats)
	a.Get("/v1/:ns/stats", s.handleNamespaceStats)
	a.Get("/v1/:ns/misses", s.handleMisses)
	a.Get("/", s.handleDashboard)
	a.Get("/assets/*", s.handleAsset)

	// Entries by key (entries.go).
	// HEAD before GET: fiber's Get also registers HEAD, first match wins.
	// entryHooks (leases.go): run manifests, lease release on PUT, GET ?wait=.
	a.Head("/v1/:ns/entries/:key", s.entryHooks, s.handleHeadEntry)
	a.Get("/v1/:ns/entries/:key", s.entryHooks, s.handleGetEntry)
	a.Put("/v1/:ns/entries/:key", s.entryHooks, s.handlePutEntry)
	a.Delete("/v1/:ns/entries/:key", s.handleDeleteEntry)

	// Batch fetch and existence (batch.go), compile leases (leases.go), run
	// manifests (runs.go).
	a.Post("/v1/:ns/batch", s.handleBatch)
	a.Post("/v1/:ns/exists", s.handleExists)
	a.Post("/v1/:ns/leases/:key", s.handleAcquireLease)
	a.Delete("/v1/:ns/leases/:key", s.handleReleaseLease)
	a.Get("/v1/:ns/runs/:run/manifest", s.handleRunManifest)

	// Signatures to keys through the plugins; lookup by signature (keys.go).
	a.Post("/v1/:ns/keys", s.handleKeys)
	a.Post("/v1/:ns/lookup", s.handleLookup)
}
