package api

import (
	"archive/tar"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/store"
)

// MaxBatchKeys is the most keys one batch or exists request may name.
const MaxBatchKeys = 10_000

// PAX records on every entry member of a batch stream, and the name of the
// stream's last member.
const (
	PAXSHA256         = "CACHESVC.sha256"
	PAXCompileSeconds = "CACHESVC.compile_seconds"
	PAXName           = "CACHESVC.name"
	PAXBackend        = "CACHESVC.backend"
	MissingMember     = "missing.json"
)

// keysRequest is the body of batch and exists requests.
type keysRequest struct {
	Keys []string `json:"keys"`
}

// ExistsResponse is the body of POST /v1/{ns}/exists.
type ExistsResponse struct {
	Present []string `json:"present"`
	Missing []string `json:"missing"`
}

// MissingList is the content of a batch stream's missing.json member.
type MissingList struct {
	Missing []string `json:"missing"`
}

// parseKeysRequest validates the namespace and a {"keys": [...]} body:
// 1 to MaxBatchKeys keys, each 64 lowercase hex (a bad one is named by its
// index). Duplicates are dropped, first occurrence kept.
func (s *Server) parseKeysRequest(c *fiber.Ctx) (string, []store.Key, error) {
	ns := strings.Clone(c.Params("ns"))
	if err := store.ValidateNamespace(ns); err != nil {
		return "", nil, &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	var req keysRequest
	if err := s.decodeJSON(c, &req); err != nil {
		return "", nil, err
	}
	if len(req.Keys) == 0 {
		return "", nil, Errorf(http.StatusBadRequest, "no_keys", `The body must be {"keys": [...]} with 1 to %d keys.`, MaxBatchKeys)
	}
	if len(req.Keys) > MaxBatchKeys {
		return "", nil, Errorf(http.StatusRequestEntityTooLarge, "too_many_keys", "The request names %d keys; the limit is %d per request: split it.", len(req.Keys), MaxBatchKeys)
	}
	keys := make([]store.Key, 0, len(req.Keys))
	seen := make(map[store.Key]struct{}, len(req.Keys))
	for i, ks := range req.Keys {
		k, err := store.ParseKey(ks)
		if err != nil {
			return "", nil, &Error{Status: http.StatusBadRequest, Code: "bad_key", Message: sentence(fmt.Sprintf("keys[%d]: %s", i, err)), Err: err}
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		keys = append(keys, k)
	}
	return ns, keys, nil
}

// handleExists serves POST /v1/{ns}/exists {"keys": [...]} →
// {"present": [...], "missing": [...]}, in request order, without bodies.
// It does not count as an access.
func (s *Server) handleExists(c *fiber.Ctx) error {
	run, err := runHeader(c)
	if err != nil {
		return err
	}
	ns, keys, err := s.parseKeysRequest(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	out := ExistsResponse{Present: []string{}, Missing: []string{}}
	for _, k := range keys {
		_, err := s.cfg.Store.Stat(ctx, ns, k)
		switch {
		case err == nil:
			out.Present = append(out.Present, k.String())
		case errors.Is(err, store.ErrNotFound):
			out.Missing = append(out.Missing, k.String())
		default:
			return fmt.Errorf("stat %s/%s: %w", ns, k, err)
		}
		if run != "" {
			s.runs.RecordLookup(ns, run, k)
		}
	}
	return c.JSON(out)
}

// handleBatch serves POST /v1/{ns}/batch {"keys": [...]}: an
// application/x-tar stream with one member per entry found, in request
// order, named by its key and carrying PAX records CACHESVC.sha256,
// CACHESVC.compile_seconds, CACHESVC.name and CACHESVC.backend; the last
// member is missing.json ({"missing": [...]}). Entries are streamed one at a
// time from the store, so memory stays bounded whatever their total size.
//
// A stream that ends without missing.json is broken: when a stored chunk
// fails its checksum mid-entry the server aborts the connection (the entry is
// quarantined), so a client never sees a complete wrong member.
func (s *Server) handleBatch(c *fiber.Ctx) error {
	run, err := runHeader(c)
	if err != nil {
		return err
	}
	ns, keys, err := s.parseKeysRequest(c)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(s.baseCtx)
	// The stream outlives the handler; count it in flight so Shutdown waits
	// for it (and cancels it when the grace period ends).
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Add(-1)
		defer cancel()
		err := s.writeBatch(ctx, pw, ns, run, keys)
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			s.log.Error("batch stream aborted", "namespace", ns, "keys", len(keys), "err", err)
		}
		pw.CloseWithError(err) // nil closes cleanly
	}()
	c.Response().Header.SetContentType("application/x-tar")
	c.Status(http.StatusOK)
	c.Context().SetBodyStream(&batchBody{PipeReader: pr, cancel: cancel}, -1)
	return nil
}

// batchBody is the response body of a batch; fasthttp closes it when the
// response is done or the client went away, which stops the writer.
type batchBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

// Close stops the batch writer.
func (b *batchBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// writeBatch writes the tar stream for keys to w. Any error means the stream
// must be aborted, not finished.
func (s *Server) writeBatch(ctx context.Context, w io.Writer, ns, run string, keys []store.Key) error {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	missing := MissingList{Missing: []string{}}
	buf := make([]byte, 64<<10)
	for _, k := range keys {
		if run != "" {
			s.runs.RecordLookup(ns, run, k)
		}
		m, rc, err := s.cfg.Store.Get(ctx, ns, k, 0, -1)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
			s.countLookup(ns, run, "", k, nil, 0)
			missing.Missing = append(missing.Missing, k.String())
			continue
		}
		if err != nil {
			return fmt.Errorf("get %s/%s: %w", ns, k, err)
		}
		s.countLookup(ns, run, "", k, &m, m.Size)
		err = writeMember(tw, k, m, rc, buf)
		rc.Close()
		if err != nil {
			return fmt.Errorf("stream %s/%s: %w", ns, k, err)
		}
	}
	body, err := json.Marshal(missing)
	if err != nil {
		return fmt.Errorf("encode %s: %w", MissingMember, err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: MissingMember, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("write %s header: %w", MissingMember, err)
	}
	if _, err := tw.Write(body); err != nil {
		return fmt.Errorf("write %s: %w", MissingMember, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish tar stream: %w", err)
	}
	s.metrics.bytesOut.Add(float64(cw.n))
	s.totals.bytesOut.Add(cw.n)
	return nil
}

// writeMember writes one entry as a tar member.
func writeMember(tw *tar.Writer, k store.Key, m store.Meta, r io.Reader, buf []byte) error {
	pax := map[string]string{
		PAXSHA256:         hex.EncodeToString(m.SHA256[:]),
		PAXCompileSeconds: strconv.FormatFloat(m.CompileSeconds, 'f', -1, 64),
	}
	if m.Name != "" && utf8.ValidString(m.Name) {
		pax[PAXName] = m.Name
	}
	if m.Backend != "" && utf8.ValidString(m.Backend) {
		pax[PAXBackend] = m.Backend
	}
	hdr := &tar.Header{
		Typeflag:   tar.TypeReg,
		Name:       k.String(),
		Mode:       0o644,
		Size:       m.Size,
		ModTime:    m.Created,
		Format:     tar.FormatPAX,
		PAXRecords: pax,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(r, m.Size), buf)
	if err != nil {
		return fmt.Errorf("copy body after %d bytes: %w", n, err)
	}
	if n != m.Size {
		return fmt.Errorf("entry ended after %d of %d bytes", n, m.Size)
	}
	return nil
}

// countingWriter counts bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

// Write writes p and counts it.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
