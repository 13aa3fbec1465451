package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/store"
)

// HeaderKey carries the computed key on a lookup response.
const HeaderKey = "X-Cachesvc-Key"

// KeyResponse is the JSON body of POST /v1/{ns}/keys.
type KeyResponse struct {
	Key         string            `json:"key"`
	Backend     string            `json:"backend"`
	Plugin      string            `json:"plugin"`
	DisplayName string            `json:"display_name"`
	Components  map[string]string `json:"components"`
}

// LookupMiss is the JSON body of a 404 from POST /v1/{ns}/lookup: the usual
// error object plus the key and what explains the miss.
type LookupMiss struct {
	Error       errorObject         `json:"error"`
	Key         string              `json:"key"`
	Backend     string              `json:"backend"`
	Plugin      string              `json:"plugin"`
	DisplayName string              `json:"display_name"`
	Components  map[string]string   `json:"components"`
	Explanation explain.Explanation `json:"explanation"`
}

// keyFor reads the signature body (bounded by the keyer's limit) and computes
// its key.
func (s *Server) keyFor(c *fiber.Ctx) (string, keying.Result, error) {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return "", keying.Result{}, &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	k := s.cfg.Keyer
	if k == nil {
		return "", keying.Result{}, Errorf(http.StatusNotImplemented, "keying_disabled", "This server has no plugins configured; compute keys client-side.")
	}
	limit := k.MaxSignatureBytes()
	if cl := c.Request().Header.ContentLength(); cl > 0 && int64(cl) > limit {
		return "", keying.Result{}, tooLarge(int64(cl), limit)
	}
	body := bodyStream(c, limit, func(n int) { s.metrics.bytesIn.Add(float64(n)) })
	var buf bytes.Buffer
	if cl := c.Request().Header.ContentLength(); cl > 0 {
		// Room for the EOF read too: bytes.Buffer.ReadFrom grows (a copy of
		// the whole signature) when less than MinRead bytes are free.
		buf.Grow(cl + bytes.MinRead)
	}
	if _, err := io.Copy(&buf, body); err != nil {
		if errors.Is(err, store.ErrTooLarge) {
			return "", keying.Result{}, tooLarge(-1, limit)
		}
		return "", keying.Result{}, fmt.Errorf("read signature: %w", err)
	}
	res, err := k.Key(c.UserContext(), buf.Bytes())
	if err != nil {
		return "", keying.Result{}, err
	}
	return ns, res, nil
}

func tooLarge(n, limit int64) error {
	msg := fmt.Sprintf("The signature exceeds the limit of %d bytes.", limit)
	if n >= 0 {
		msg = fmt.Sprintf("The signature is %d bytes; the limit is %d bytes.", n, limit)
	}
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "signature_too_large", Message: msg, Err: keying.ErrTooLarge}
}

// handleKeys serves POST /v1/{ns}/keys: signature in, key and components out.
func (s *Server) handleKeys(c *fiber.Ctx) error {
	_, res, err := s.keyFor(c)
	if err != nil {
		return err
	}
	return c.JSON(KeyResponse{Key: res.Key.String(), Backend: res.Backend, Plugin: res.Plugin,
		DisplayName: res.DisplayName, Components: res.Components})
}

// handleLookup serves POST /v1/{ns}/lookup: the signature's executable
// (200, streamed, key in X-Cachesvc-Key) or a 404 that carries the key, its
// components and an explanation of the miss.
func (s *Server) handleLookup(c *fiber.Ctx) error {
	run, err := runHeader(c)
	if err != nil {
		return err
	}
	ns, res, err := s.keyFor(c)
	if err != nil {
		return err
	}
	key := res.Key
	if run != "" {
		s.runs.RecordLookup(ns, run, key)
	}
	c.Set(HeaderKey, key.String())
	m, rc, err := s.cfg.Store.Get(c.UserContext(), ns, key, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		s.countLookup(ns, run, res.Backend, key, nil, 0)
		ex := s.explainMiss(c, ns, res.Backend, key, res.DisplayName, res.Components)
		return c.Status(http.StatusNotFound).JSON(LookupMiss{
			Error: errorObject{Code: "not_found", Message: fmt.Sprintf(
				"No entry for this signature (key %s) in namespace %q.", key, ns)},
			Key: key.String(), Backend: res.Backend, Plugin: res.Plugin,
			DisplayName: res.DisplayName, Components: res.Components, Explanation: ex,
		})
	}
	if err != nil {
		return err
	}
	s.countLookup(ns, run, res.Backend, key, &m, m.Size)
	setEntryHeaders(c, m)
	s.setProvenance(c, m) // provenance.go
	c.Status(http.StatusOK)
	return s.sendEntryBody(c, ns, key, rc, m.Size) // entries.go
}

// recallSignature fills what a PUT did not declare (components, backend,
// display name) from a recent lookup or keys call that issued key.
func (s *Server) recallSignature(key cachekey.Key, opts *store.PutOptions) {
	if s.cfg.Keyer == nil {
		return
	}
	res, ok := s.cfg.Keyer.Recall(key)
	if !ok {
		return
	}
	if len(opts.Components) == 0 && len(res.Components) > 0 {
		opts.Components = make(map[string]string, len(res.Components))
		for k, v := range res.Components {
			opts.Components[k] = v
		}
	}
	if opts.Backend == "" {
		opts.Backend = res.Backend
	}
	if opts.Name == "" && len(res.DisplayName) <= maxHeaderValue {
		opts.Name = res.DisplayName
	}
}
