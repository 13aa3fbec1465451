package api

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
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
	// PAXSignature is the entry's X-Cachesvc-Signature, when the server
	// signs entries (provenance.go).
	PAXSignature  = "CACHESVC.signature"
	MissingMember = "missing.json"
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
func (s *Server) parseKeysRequest(c *fiber.Ctx) (string, []cachekey.Key, error) {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
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
	keys := make([]cachekey.Key, 0, len(req.Keys))
	seen := make(map[cachekey.Key]struct{}, len(req.Keys))
	for i, ks := range req.Keys {
		k, err := cachekey.ParseKey(ks)
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
// member is missing.json ({"missing": [...]}).
//
// The server first looks up every key's metadata (no bodies), so it knows
// the stream's exact length and sends it as Content-Length; then it streams
// the entries one at a time from the store, in large writes. Memory stays
// bounded whatever the entries' total size (the plan is a few hundred bytes
// per key).
//
// A stream shorter than its Content-Length, or without missing.json, is
// broken: when a stored chunk fails its checksum mid-entry (the entry is
// quarantined), or an entry is evicted between planning and streaming, the
// server aborts the connection, so a client never sees a complete wrong
// member. Clients retry a broken batch.
func (s *Server) handleBatch(c *fiber.Ctx) error {
	run, err := runHeader(c)
	if err != nil {
		return err
	}
	ns, keys, err := s.parseKeysRequest(c)
	if err != nil {
		return err
	}
	b := &batchStream{s: s, ns: ns}
	ctx := c.UserContext()
	missing := MissingList{Missing: []string{}}
	var total int64
	for _, k := range keys {
		if run != "" {
			s.runs.RecordLookup(ns, run, k)
		}
		m, err := s.cfg.Store.Stat(ctx, ns, k)
		if errors.Is(err, store.ErrNotFound) {
			s.recordLookup(false)
			missing.Missing = append(missing.Missing, k.String())
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s/%s: %w", ns, k, err)
		}
		s.recordLookup(true)
		sig := s.signature(m) // provenance.go
		hdrLen, err := memberHeaderLen(k, m, sig)
		if err != nil {
			return fmt.Errorf("tar header for %s/%s: %w", ns, k, err)
		}
		b.members = append(b.members, planned{key: k, size: m.Size, sha: m.SHA256, sig: sig, hdrLen: hdrLen})
		total += int64(hdrLen) + m.Size + tarPad(m.Size)
	}
	tail, err := tarTail(missing)
	if err != nil {
		return fmt.Errorf("encode %s: %w", MissingMember, err)
	}
	b.tail = tail
	total += int64(len(tail))
	b.total = total
	b.ctx, b.cancel = context.WithCancel(s.baseCtx)
	// The body is written after the handler returns; count it in flight so
	// that Shutdown waits for it (and cancels it when the grace period ends).
	s.inflight.Add(1)
	c.Response().Header.SetContentType("application/x-tar")
	c.Status(http.StatusOK)
	c.Context().SetBodyStream(b, int(total))
	return nil
}

// planned is one member of a batch, from the entry's metadata.
type planned struct {
	key    cachekey.Key
	size   int64
	sha    [32]byte
	sig    string // PAXSignature, "" without a signing key
	hdrLen int
}

// tarPad is the zero padding after a member's data.
func tarPad(size int64) int64 { return (512 - size%512) % 512 }

// paxRecords are the PAX records of an entry's member; sig, if not empty,
// is its signature.
func paxRecords(m store.Meta, sig string) map[string]string {
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
	if sig != "" {
		pax[PAXSignature] = sig
	}
	return pax
}

// memberHeader returns the tar header blocks (PAX extended header and the
// member's own header) for an entry.
func memberHeader(k cachekey.Key, m store.Meta, sig string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeReg,
		Name:       k.String(),
		Mode:       0o644,
		Size:       m.Size,
		ModTime:    m.Created.Truncate(time.Second),
		Format:     tar.FormatPAX,
		PAXRecords: paxRecords(m, sig),
	})
	return buf.Bytes(), err
}

// maxUSTARSize is the largest size a USTAR header holds (11 octal digits);
// larger members need a PAX size record that memberHeaderLen does not count.
const maxUSTARSize = 1<<33 - 1

// memberHeaderLen returns len(memberHeader(k, m)) without building it: the
// PAX header block, its records padded to 512 bytes, and the member's header
// block. (Names are 64 characters and times whole seconds, so archive/tar
// adds no records of its own below maxUSTARSize.) writeMember checks the
// real length against it and aborts the stream on a mismatch.
func memberHeaderLen(k cachekey.Key, m store.Meta, sig string) (int, error) {
	if m.Size > maxUSTARSize {
		h, err := memberHeader(k, m, sig)
		return len(h), err
	}
	n := 0
	for key, v := range paxRecords(m, sig) {
		size := len(key) + len(v) + 3 // ' ', '=', '\n'
		size += len(strconv.Itoa(size))
		if size2 := len(strconv.Itoa(size)) + len(key) + len(v) + 3; size2 != size {
			size = size2
		}
		n += size
	}
	return 512 + (n+511)/512*512 + 512, nil
}

// tarTail returns the missing.json member and the end-of-archive blocks.
func tarTail(missing MissingList) ([]byte, error) {
	body, err := json.Marshal(missing)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: MissingMember, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// batchStream is the body of a batch response. fasthttp copies it with
// WriteTo (io.CopyBuffer prefers it), which writes entries in large pieces;
// Read is there for other callers. fasthttp closes it when done.
type batchStream struct {
	s       *Server
	ns      string
	members []planned
	tail    []byte
	total   int64
	ctx     context.Context
	cancel  context.CancelFunc

	pr        *io.PipeReader // only when read through Read
	closeOnce sync.Once
}

// WriteTo writes the whole stream to w. An error means the stream must be
// aborted: fasthttp then closes the connection short of Content-Length.
func (b *batchStream) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := b.write(cw)
	b.s.metrics.bytesOut.Add(float64(cw.n))
	b.s.totals.bytesOut.Add(cw.n)
	switch {
	case err == nil || b.ctx.Err() != nil:
	case cw.err != nil: // the client went away
		b.s.log.Info("batch stream cut by the client", "namespace", b.ns, "members", len(b.members), "sent", cw.n, "of", b.total, "err", err)
	default:
		b.s.log.Error("batch stream aborted", "namespace", b.ns, "members", len(b.members), "sent", cw.n, "of", b.total, "err", err)
	}
	return cw.n, err
}

func (b *batchStream) write(w io.Writer) error {
	buf := make([]byte, 256<<10)
	for _, p := range b.members {
		m, rc, err := b.s.cfg.Store.Get(b.ctx, b.ns, p.key, 0, -1)
		if err != nil {
			return fmt.Errorf("get %s/%s: %w", b.ns, p.key, err)
		}
		err = b.writeMember(w, p, m, rc, buf)
		rc.Close()
		if err != nil {
			return fmt.Errorf("stream %s/%s: %w", b.ns, p.key, err)
		}
	}
	if _, err := w.Write(b.tail); err != nil {
		return fmt.Errorf("write %s: %w", MissingMember, err)
	}
	return nil
}

func (b *batchStream) writeMember(w io.Writer, p planned, m store.Meta, r io.Reader, buf []byte) error {
	if m.Size != p.size || m.SHA256 != p.sha {
		return errors.New("entry changed since the batch was planned")
	}
	hdr, err := memberHeader(p.key, m, p.sig)
	if err != nil || len(hdr) != p.hdrLen {
		return fmt.Errorf("tar header changed since the batch was planned: %w", err)
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	var n int64
	for n < m.Size {
		k, err := r.Read(buf[:min(int64(len(buf)), m.Size-n)])
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return werr
			}
			n += int64(k)
		}
		if err == io.EOF && n < m.Size {
			return fmt.Errorf("entry ended after %d of %d bytes", n, m.Size)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read after %d bytes: %w", n, err)
		}
	}
	if pad := tarPad(m.Size); pad > 0 {
		clear(buf[:pad])
		if _, err := w.Write(buf[:pad]); err != nil {
			return err
		}
	}
	return nil
}

// Read reads the stream through a pipe fed by WriteTo.
func (b *batchStream) Read(p []byte) (int, error) {
	if b.pr == nil {
		pr, pw := io.Pipe()
		b.pr = pr
		go func() {
			_, err := b.WriteTo(pw)
			pw.CloseWithError(err)
		}()
	}
	return b.pr.Read(p)
}

// Close stops the stream and ends its in-flight count.
func (b *batchStream) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		if b.pr != nil {
			b.pr.Close()
		}
		b.s.inflight.Add(-1)
	})
	return nil
}

// countingWriter counts bytes written through it and keeps the first
// write error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

// Write writes p and counts it.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
