package api

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// adminEntriesAPI serves the admin tools over many entries: listing by
// filters, one entry's provenance, and a namespace's export and import as
// a tar stream (adminexport.go).
type adminEntriesAPI struct {
	store    Store
	io       *streams
	maxEntry int64
	bytesIn  prometheus.Counter
	baseCtx  context.Context // parent of export streams; Shutdown cancels it
	log      *slog.Logger
}

// routes declares the admin entry routes.
func (g *adminEntriesAPI) routes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/v1/entries", Access: adminAll, Handler: g.handleListAll},
		{Method: http.MethodGet, Path: "/v1/:ns/entries", Access: adminNS, Handler: g.handleList},
		{Method: http.MethodGet, Path: "/v1/:ns/entries/:key/meta", Access: adminNS, Handler: g.handleMeta},
		{Method: http.MethodGet, Path: "/v1/:ns/export", Access: adminNS, Handler: g.handleExport},
		{Method: http.MethodPost, Path: "/v1/:ns/import", Access: adminNS, Upload: true, Handler: g.handleImport},
	}
}

// maxListScan bounds the entries one page of a listing examines: with
// filters that match rarely, a page may come back with fewer than limit
// entries (even none) and a next cursor, so that no request walks a huge
// namespace at once.
const maxListScan = 100_000

// entryFilter selects entries by provenance, age and size; the zero value
// (with maxSize -1) selects every entry.
type entryFilter struct {
	writer, run, backend string
	// createdBefore and accessedBefore, when not zero, select entries
	// created (older_than) or last accessed (idle_for) before them.
	createdBefore, accessedBefore time.Time
	minSize, maxSize              int64 // maxSize < 0: no bound
}

// parseFilter reads the filter query parameters: writer, run, backend,
// older_than, idle_for (ages, wire.ParseAge), min_size and max_size (bytes).
func parseFilter(c *fiber.Ctx, now time.Time) (entryFilter, error) {
	f := entryFilter{writer: c.Query("writer"), run: c.Query("run"), backend: c.Query("backend"), maxSize: -1}
	// A backend or run no entry can have (a typo such as XLA) would match
	// nothing and look like an empty namespace.
	if f.backend != "" {
		if err := wire.CheckBackend(f.backend); err != nil {
			return f, Errorf(http.StatusBadRequest, "bad_filter", "%s.", err)
		}
	}
	if f.run != "" {
		if err := manifest.ValidateRun(f.run); err != nil {
			return f, Errorf(http.StatusBadRequest, "bad_filter", "run: %s.", err)
		}
	}
	for _, a := range []struct {
		param string
		into  *time.Time
	}{{"older_than", &f.createdBefore}, {"idle_for", &f.accessedBefore}} {
		if v := c.Query(a.param); v != "" {
			d, err := wire.ParseAge(v)
			if err != nil {
				return f, Errorf(http.StatusBadRequest, "bad_filter", "%s: %s.", a.param, err)
			}
			*a.into = now.Add(-d)
		}
	}
	for _, s := range []struct {
		param string
		into  *int64
	}{{"min_size", &f.minSize}, {"max_size", &f.maxSize}} {
		if v := c.Query(s.param); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return f, Errorf(http.StatusBadRequest, "bad_filter", "%s must be a number of bytes (0 or more), got %s.", s.param, wire.Echo(v))
			}
			*s.into = n
		}
	}
	if f.maxSize >= 0 && f.minSize > f.maxSize {
		return f, Errorf(http.StatusBadRequest, "bad_filter", "min_size %d is above max_size %d: no entry can match.", f.minSize, f.maxSize)
	}
	return f, nil
}

// match reports whether m passes every filter.
func (f entryFilter) match(m store.Meta) bool {
	switch {
	case f.writer != "" && m.Writer != f.writer,
		f.run != "" && m.Run != f.run,
		f.backend != "" && m.Backend != f.backend,
		!f.createdBefore.IsZero() && !m.Created.Before(f.createdBefore),
		!f.accessedBefore.IsZero() && !m.LastAccess.Before(f.accessedBefore),
		m.Size < f.minSize,
		f.maxSize >= 0 && m.Size > f.maxSize:
		return false
	}
	return true
}

// cursor is a position in a walk: the last entry a page visited.
type cursor struct {
	ns  string
	key cachekey.Key
}

// parseCursor reads an after= cursor: a key in a namespace's listing, or
// "ns/key" across namespaces. nil means the start.
func parseCursor(v, ns string) (*cursor, error) {
	if v == "" {
		return nil, nil
	}
	c := &cursor{ns: ns}
	ks := v
	if ns == "" {
		var ok bool
		if c.ns, ks, ok = strings.Cut(v, "/"); !ok || cachekey.ValidateNamespace(c.ns) != nil {
			return nil, Errorf(http.StatusBadRequest, "bad_cursor", "after must be the next cursor of the previous page (NAMESPACE/KEY here), got %s.", wire.Echo(v))
		}
	}
	k, err := cachekey.ParseKey(ks)
	if err != nil {
		return nil, Errorf(http.StatusBadRequest, "bad_cursor", "after must be the next cursor of the previous page: %s.", err)
	}
	c.key = k
	return c, nil
}

// encode renders c as parseCursor reads it.
func (c cursor) encode(allNS bool) string {
	if allNS {
		return c.ns + "/" + c.key.String()
	}
	return c.key.String()
}

// walkFrom walks ns ("" for all) from after cur (nil: the start); a store
// without WalkAfter is walked from its start, skipping to the cursor
// (store.WalkAfter).
func walkFrom(ctx context.Context, st Store, ns string, cur *cursor, fn func(store.Meta) bool) error {
	if cur == nil {
		return st.Walk(ctx, ns, fn)
	}
	return store.WalkAfter(ctx, st, ns, cur.ns, cur.key, fn)
}

// entryInfo is m in its wire form, with sig (the entry's signature, "" for
// none).
func entryInfo(m store.Meta, sig string) wire.EntryInfo {
	return wire.EntryInfo{
		Namespace: m.Namespace, Key: m.Key.String(), Size: m.Size, SHA256: hex.EncodeToString(m.SHA256[:]),
		Created: m.Created, LastAccess: m.LastAccess, Hits: m.Hits, Backend: m.Backend, Name: m.Name,
		CompileSeconds: m.CompileSeconds, Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components,
		Signature: sig,
	}
}

// handleList serves GET /v1/{ns}/entries: one page of the namespace's
// entries that pass the filters, in key order.
func (g *adminEntriesAPI) handleList(c *fiber.Ctx) error {
	return g.list(c, reqOf(c).Namespace)
}

// handleListAll serves GET /v1/entries: the same across every namespace
// (after= is then NAMESPACE/KEY).
func (g *adminEntriesAPI) handleListAll(c *fiber.Ctx) error { return g.list(c, "") }

// list answers one page of the listing of ns ("" for all namespaces):
// limit (1 to wire.MaxListLimit, default the maximum) entries after the
// cursor, and the cursor of the next page when the walk stopped early.
func (g *adminEntriesAPI) list(c *fiber.Ctx, ns string) error {
	f, err := parseFilter(c, time.Now())
	if err != nil {
		return err
	}
	limit, err := pageLimit(c)
	if err != nil {
		return err
	}
	cur, err := parseCursor(c.Query("after"), ns)
	if err != nil {
		return err
	}
	out := wire.EntryList{Entries: []wire.EntryInfo{}}
	var last cursor
	scanned, stopped := 0, false
	err = walkFrom(c.UserContext(), g.store, ns, cur, func(m store.Meta) bool {
		scanned++
		last = cursor{ns: m.Namespace, key: m.Key}
		if f.match(m) {
			out.Entries = append(out.Entries, entryInfo(m, ""))
		}
		stopped = len(out.Entries) == limit || scanned == maxListScan
		return !stopped
	})
	if err != nil {
		return err
	}
	if stopped {
		out.Next = last.encode(ns == "")
	}
	return c.JSON(out)
}

// handleMeta serves GET /v1/{ns}/entries/{key}/meta: the entry's metadata
// and provenance (writer, run, times, hits, labels, components and, with a
// signing key, its signature). It does not count as an access.
func (g *adminEntriesAPI) handleMeta(c *fiber.Ctx) error {
	r := reqOf(c)
	m, err := g.store.Stat(c.UserContext(), r.Namespace, r.Key)
	if err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	return c.JSON(entryInfo(m, g.io.signature(m)))
}

// pageLimit reads a paged listing's ?limit= (the admin listing and the
// quarantine list): 1 to wire.MaxListLimit, the maximum when absent.
func pageLimit(c *fiber.Ctx) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return wire.MaxListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > wire.MaxListLimit {
		return 0, Errorf(http.StatusBadRequest, "bad_limit", "limit must be an integer from 1 to %d, got %s.", wire.MaxListLimit, wire.Echo(v))
	}
	return n, nil
}
