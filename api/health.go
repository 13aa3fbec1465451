package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// handleHealthz serves GET /healthz: 200 while the process serves HTTP.
func (s *Server) handleHealthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "version": s.cfg.Version})
}

// handleReadyz serves GET /readyz: 200 while the store is open, the built-in
// plugins have compiled and the server is not shutting down; 503 otherwise.
func (s *Server) handleReadyz(c *fiber.Ctx) error {
	if s.closing.Load() {
		return &Error{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "The server is shutting down."}
	}
	if err := s.storeReady(c.UserContext()); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: sentence(err.Error()), Err: err}
	}
	if s.cfg.Keyer != nil && s.cfg.Keyer.Host() != nil && s.cfg.Keyer.Host().Pending() {
		return &Error{Status: http.StatusServiceUnavailable, Code: "plugins_compiling",
			Message: "The built-in canonicalization plugins are still compiling (a first start takes seconds; later starts reuse the compiled code under the data dir)."}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// readier is implemented by stores that can say whether they serve requests.
type readier interface{ Ready() error }

// storeReady reports whether the store serves requests: through its Ready
// method if it has one, else by a metadata lookup of a probe key, which
// answers ErrNotFound from an open store and ErrClosed from a closed one.
func (s *Server) storeReady(ctx context.Context) error {
	if r, ok := s.cfg.Store.(readier); ok {
		return r.Ready()
	}
	_, err := s.cfg.Store.Stat(ctx, cachekey.DefaultNamespace, cachekey.Key{})
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("store is not ready: %w", err)
}
