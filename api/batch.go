package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// batchAPI serves many keys in one request: a tar stream of the entries
// found (what warm and prefetch use), or which keys exist.
type batchAPI struct {
	store   Store
	out     Outcomes
	io      *streams
	runs    *manifest.Recorder
	body    bodies
	baseCtx context.Context // parent of the streams' contexts; Shutdown cancels it
	log     *slog.Logger
}

// routes declares the batch and exists routes.
func (g *batchAPI) routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/:ns/batch", Access: readNS, JSONBody: true, Handler: g.handleBatch},
		{Method: http.MethodPost, Path: "/v1/:ns/exists", Access: readNS, JSONBody: true, Handler: g.handleExists},
	}
}

// parseKeysRequest validates a {"keys": [...]} body:
// 1 to wire.MaxBatchKeys keys, each 64 lowercase hex (a bad one is named by its
// index). Duplicates are dropped, first occurrence kept.
func (g *batchAPI) parseKeysRequest(c *fiber.Ctx) ([]cachekey.Key, error) {
	var req wire.KeysRequest
	if err := g.body.decodeJSON(c, &req, "keys"); err != nil {
		return nil, err
	}
	if len(req.Keys) == 0 {
		return nil, Errorf(http.StatusBadRequest, "no_keys", `The body must be {"keys": [...]} with 1 to %d keys.`, wire.MaxBatchKeys)
	}
	if len(req.Keys) > wire.MaxBatchKeys {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too_many_keys", "The request names %d keys; the limit is %d per request: split it.", len(req.Keys), wire.MaxBatchKeys)
	}
	keys := make([]cachekey.Key, 0, len(req.Keys))
	seen := make(map[cachekey.Key]struct{}, len(req.Keys))
	for i, ks := range req.Keys {
		k, err := cachekey.ParseKey(ks)
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Code: "bad_key", Message: sentence(fmt.Sprintf("keys[%d]: %s", i, err)), Err: err}
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		keys = append(keys, k)
	}
	return keys, nil
}

// handleExists serves POST /v1/{ns}/exists {"keys": [...]} →
// {"present": [...], "missing": [...]}, in request order, without bodies.
// It does not count as an access.
func (g *batchAPI) handleExists(c *fiber.Ctx) error {
	ns, run := reqOf(c).Namespace, reqOf(c).Run
	keys, err := g.parseKeysRequest(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	out := wire.ExistsResponse{Present: []string{}, Missing: []string{}}
	for _, k := range keys {
		_, err := g.store.Stat(ctx, ns, k)
		switch {
		case err == nil:
			out.Present = append(out.Present, k.String())
		case errors.Is(err, store.ErrNotFound):
			out.Missing = append(out.Missing, k.String())
		default:
			return fmt.Errorf("stat %s/%s: %w", ns, k, err)
		}
		if run != "" {
			g.runs.RecordLookup(ns, run, k)
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
func (g *batchAPI) handleBatch(c *fiber.Ctx) error {
	r := reqOf(c)
	ns, run, anon, writer := r.Namespace, r.Run, r.Anonymous, r.Writer
	keys, err := g.parseKeysRequest(c)
	if err != nil {
		return err
	}
	b := &batchStream{store: g.store, out: g.out, io: g.io, log: g.log, ns: ns}
	ctx := c.UserContext()
	missing := wire.MissingList{Missing: []string{}}
	var total int64
	for _, k := range keys {
		if run != "" {
			g.runs.RecordLookup(ns, run, k)
		}
		m, err := g.store.Stat(ctx, ns, k)
		if errors.Is(err, store.ErrNotFound) {
			// Counted as missing.json is sent (batchtar.go): a stream
			// that breaks before it told the client of no miss, and the
			// client's retry counts it.
			b.misses = append(b.misses, Lookup{Route: RouteBatch, Namespace: ns, Key: k, Run: run, Anonymous: anon, Writer: writer})
			missing.Missing = append(missing.Missing, k.String())
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s/%s: %w", ns, k, err)
		}
		sig := g.io.signature(m)
		hdrLen, err := memberHeaderLen(k, m, sig)
		if err != nil {
			return fmt.Errorf("tar header for %s/%s: %w", ns, k, err)
		}
		b.members = append(b.members, planned{key: k, size: m.Size, sha: m.SHA256, sig: sig, hdrLen: hdrLen,
			hit: Lookup{Route: RouteBatch, Namespace: ns, Key: k, Run: run, Anonymous: anon, Writer: writer, Hit: true,
				Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds, Bytes: m.Size}})
		total += int64(hdrLen) + m.Size + tarPad(m.Size)
	}
	tail, err := tarTail(missing)
	if err != nil {
		return fmt.Errorf("encode %s: %w", wire.MissingMember, err)
	}
	b.tail = tail
	total += int64(len(tail))
	b.total = total
	b.ctx, b.cancel = context.WithCancel(g.baseCtx)
	// The body is written after the handler returns; count it in flight so
	// that Shutdown waits for it (and cancels it when the grace period ends).
	g.io.inflight.Add(1)
	c.Response().Header.SetContentType("application/x-tar")
	c.Status(http.StatusOK)
	c.Context().SetBodyStream(b, int(total))
	return nil
}
