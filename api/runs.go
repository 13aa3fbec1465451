package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
)

// handleRunManifest serves GET /v1/{ns}/runs/{run}/manifest: the keys the
// run looked up and wrote, as
// {"run", "namespace", "created", "updated", "keys": [{"key", "name",
// "looked_up", "written"}], "truncated"}. A key recorded without a name (a
// lookup) gets the stored entry's name when the entry exists. 404
// unknown_run when no request carried the run recently.
func (s *Server) handleRunManifest(c *fiber.Ctx) error {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	run := strings.Clone(c.Params("run"))
	if err := manifest.ValidateRun(run); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_run", Message: sentence(err.Error()), Err: err}
	}
	m, err := s.runs.Manifest(ns, run)
	if errors.Is(err, manifest.ErrUnknownRun) {
		return &Error{Status: http.StatusNotFound, Code: "unknown_run", Message: sentence(err.Error()), Err: err}
	}
	if err != nil {
		return fmt.Errorf("manifest %s/%s: %w", ns, run, err)
	}
	ctx := c.UserContext()
	for i := range m.Keys {
		if m.Keys[i].Name != "" {
			continue
		}
		if key, err := cachekey.ParseKey(m.Keys[i].Key); err == nil {
			if meta, err := s.cfg.Store.Stat(ctx, ns, key); err == nil {
				m.Keys[i].Name = meta.Name
			}
		}
	}
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	// Keys are encoded one by one: a manifest can hold tens of thousands.
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		head, _ := json.Marshal(struct {
			Run       string `json:"run"`
			Namespace string `json:"namespace"`
			Created   any    `json:"created"`
			Updated   any    `json:"updated"`
			Truncated bool   `json:"truncated"`
		}{m.Run, m.Namespace, m.Created, m.Updated, m.Truncated})
		w.Write(head[:len(head)-1])
		w.WriteString(`,"keys":[`)
		for i, k := range m.Keys {
			if i > 0 {
				w.WriteByte(',')
			}
			b, _ := json.Marshal(k)
			w.Write(b)
		}
		w.WriteString("]}\n")
	})
	return nil
}

// SaveRuns writes the run manifests to their snapshot file (Config.Runs.Path),
// if any changed; serve calls it periodically and at shutdown.
func (s *Server) SaveRuns() error { return s.runs.Save() }

// saveRunsLogged saves the run manifests and logs a failure.
func (s *Server) saveRunsLogged() {
	if err := s.runs.Save(); err != nil {
		s.log.Error("save run manifests", "err", err)
	}
}

// saveRunsEvery saves the run manifests every interval until ctx ends.
func (s *Server) saveRunsEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.saveRunsLogged()
		}
	}
}
