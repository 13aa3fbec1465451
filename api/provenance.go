package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/store"
)

// Provenance headers of entry responses (GET, HEAD, PUT). HeaderRun, the
// run that wrote the entry, is shared with the PUT request headers.
const (
	// HeaderWriter names the token (or, without authentication, the
	// client address) that stored the entry.
	HeaderWriter = "X-Cachesvc-Writer"
	// HeaderCreated is when the entry was stored, RFC 3339 in UTC.
	HeaderCreated = "X-Cachesvc-Created"
	// HeaderSignature, present when the server has a signing key, is the
	// base64 Ed25519 signature of key ‖ sha256 (32 raw bytes each); see
	// auth.SignedMessage.
	HeaderSignature = "X-Cachesvc-Signature"
)

// setProvenance sets the provenance headers for entry m and, with a
// signing key, its signature.
func (s *Server) setProvenance(c *fiber.Ctx, m store.Meta) {
	h := &c.Response().Header
	if m.Writer != "" {
		h.Set(HeaderWriter, m.Writer)
	}
	if !m.Created.IsZero() {
		h.Set(HeaderCreated, m.Created.UTC().Format(time.RFC3339Nano))
	}
	if m.Run != "" {
		h.Set(HeaderRun, m.Run)
	}
	if sig := s.signature(m); sig != "" {
		h.Set(HeaderSignature, sig)
	}
}

// signature returns m's signature, or "" when the server has no signing
// key.
func (s *Server) signature(m store.Meta) string {
	if s.cfg.Signer == nil {
		return ""
	}
	return s.cfg.Signer.Sign(m.Key, m.SHA256)
}
