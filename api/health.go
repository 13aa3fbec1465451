package api

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// handleHealthz serves GET /healthz: 200 while the process serves HTTP.
func (s *Server) handleHealthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "version": s.cfg.Version})
}

// handleReadyz serves GET /readyz: 200 while the store is open and the server
// is not shutting down, 503 otherwise.
func (s *Server) handleReadyz(c *fiber.Ctx) error {
	if s.closing.Load() {
		return &Error{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "The server is shutting down."}
	}
	if err := s.storeReady(); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: sentence(err.Error()), Err: err}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// readier is implemented by stores that can say whether they serve requests.
type readier interface{ Ready() error }

// storeReady reports whether the store is open: through its Ready method if
// it has one, else by asking for its usage.
func (s *Server) storeReady() (err error) {
	if r, ok := s.cfg.Store.(readier); ok {
		return r.Ready()
	}
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("store is not open")
		}
	}()
	_ = s.cfg.Store.Usage()
	return nil
}
