package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// adminAPI serves health, readiness, metrics, the API's own description and
// the deletion of entries.
type adminAPI struct {
	store    Store
	keyer    *keying.Keyer
	metrics  fiber.Handler
	closing  *atomic.Bool
	draining *atomic.Bool // Server.Drain: /readyz fails first
	version  string
	shared   func() wire.SharedTierState // nil without a shared tier
	stats    *stats.Stats                // forgets deleted entries
	log      *slog.Logger
}

// routes declares the admin routes.
func (g *adminAPI) routes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/healthz", Access: public, Handler: g.handleHealthz},
		{Method: http.MethodGet, Path: "/readyz", Access: public, Handler: g.handleReadyz},
		{Method: http.MethodGet, Path: "/metrics", Access: readAll, Handler: g.metrics},
		{Method: http.MethodGet, Path: "/v1/openapi.json", Access: anyToken, Handler: handleOpenAPI},
		{Method: http.MethodDelete, Path: "/v1/:ns/entries/:key", Access: adminNS, Handler: g.handleDeleteEntry},
	}
}

// handleHealthz serves GET /healthz: 200 while the process serves HTTP.
func (g *adminAPI) handleHealthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "version": g.version})
}

// handleReadyz serves GET /readyz: 200 while the store is open, the built-in
// plugins have compiled and the server is neither draining nor shutting
// down; 503 otherwise
// (plugins_compiling while they compile, plugins_failed if they could not
// load).
// A replica of a fleet adds its view of the shared tier, and says
// "degraded" while the shared tier cannot be reached.
func (g *adminAPI) handleReadyz(c *fiber.Ctx) error {
	if g.closing.Load() || g.draining.Load() {
		return &Error{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "The server is shutting down."}
	}
	if err := storeReady(c.UserContext(), g.store); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: sentence(err.Error()), Err: err}
	}
	if g.keyer != nil && g.keyer.Host() != nil && g.keyer.Host().Pending() {
		if err := g.keyer.Host().LoadErr(); err != nil {
			// Compiling is over and will not be retried: waiting is no fix.
			return &Error{Status: http.StatusServiceUnavailable, Code: "plugins_failed", Err: err,
				Message: "The built-in canonicalization plugins failed to load, so key and lookup requests fail: " +
					err.Error() + ". Fix the cause (such as a --plugin-memory too small for them) and restart the server."}
		}
		return &Error{Status: http.StatusServiceUnavailable, Code: "plugins_compiling",
			Message: "The built-in canonicalization plugins are still compiling (a first start takes seconds; later starts reuse the compiled code under the data dir)."}
	}
	if g.shared == nil {
		return c.JSON(fiber.Map{"status": "ready"})
	}
	// A shared tier that cannot be reached leaves the replica ready: its hot
	// tier still serves, and failing every replica's readiness during an S3
	// outage would take the whole fleet out of the load balancer.
	st := g.shared()
	status := "ready"
	if !st.Reachable {
		status = "degraded"
	}
	return c.JSON(fiber.Map{"status": status, "shared_tier": st})
}

// storeReady reports whether st serves requests (store.Serving).
func storeReady(ctx context.Context, st Store) error {
	if err := store.Serving(ctx, st); err != nil {
		return fmt.Errorf("store is not ready: %w", err)
	}
	return nil
}

// handleOpenAPI serves GET /v1/openapi.json: the OpenAPI 3.1 description of
// this API (openapi.json in the repository, embedded).
func handleOpenAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(OpenAPI)
}

// handleDeleteEntry serves DELETE /v1/{ns}/entries/{key}: 204, or 404 on a
// miss.
func (g *adminAPI) handleDeleteEntry(c *fiber.Ctx) error {
	r := reqOf(c)
	if err := g.store.Delete(c.UserContext(), r.Namespace, r.Key); err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	g.stats.ForgetEntry(r.Namespace, "", r.Key)
	g.log.Info("entry deleted", "namespace", r.Namespace, "key", r.Key.String())
	return c.SendStatus(http.StatusNoContent)
}
