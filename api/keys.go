package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// keysAPI turns signatures into keys through the plugins, and looks entries
// up by signature, explaining misses.
type keysAPI struct {
	store   Store
	out     Outcomes
	io      *streams
	runs    *manifest.Recorder
	keyer   *keying.Keyer
	stats   *stats.Stats // explains misses
	bytesIn prometheus.Counter
	// digests counts digest-first requests by outcome (known, unknown,
	// mismatch).
	digests *prometheus.CounterVec
	// noDigest ignores wire.HeaderSignatureSHA256 (Config.NoDigestLookups).
	noDigest bool
	// sigmem bounds the memory signatures being read and keyed hold; nil
	// without a keyer.
	sigmem *sigMemory
}

// routes declares the keys and lookup routes.
func (g *keysAPI) routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/:ns/keys", Access: readNS, Handler: g.handleKeys},
		{Method: http.MethodPost, Path: "/v1/:ns/lookup", Access: readNS, Handler: g.handleLookup},
	}
}

func tooLarge(n, limit int64) error {
	msg := fmt.Sprintf("The signature exceeds the limit of %d bytes.", limit)
	if n >= 0 {
		msg = fmt.Sprintf("The signature is %d bytes; the limit is %d bytes.", n, limit)
	}
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "signature_too_large", Message: msg, Err: keying.ErrTooLarge}
}

// handleKeys serves POST /v1/{ns}/keys: signature in, key and components out.
func (g *keysAPI) handleKeys(c *fiber.Ctx) error {
	res, err := g.keyFor(c)
	if err != nil {
		return err
	}
	return c.JSON(wire.KeyResponse{Key: res.Key.String(), Backend: res.Backend, Plugin: res.Plugin,
		DisplayName: res.DisplayName, Components: res.Components})
}

// handleLookup serves POST /v1/{ns}/lookup: the signature's executable
// (200, streamed, key in X-Cachesvc-Key) or a 404 that carries the key, its
// components and an explanation of the miss.
func (g *keysAPI) handleLookup(c *fiber.Ctx) error {
	r := reqOf(c)
	res, err := g.keyFor(c)
	if err != nil {
		return err
	}
	ns, key := r.Namespace, res.Key
	if r.Run != "" {
		g.runs.RecordLookup(ns, r.Run, key)
	}
	c.Set(wire.HeaderKey, key.String())
	m, rc, err := g.store.Get(c.UserContext(), ns, key, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		ex := g.stats.Explain(ns, res.Backend, res.Components)
		g.out.Lookup(Lookup{Route: RouteLookup, Namespace: ns, Key: key, Run: r.Run, Anonymous: r.Anonymous, Writer: r.Writer, Backend: res.Backend,
			Name: wire.SanitizeName(res.DisplayName), Components: res.Components, Explanation: &ex})
		return c.Status(http.StatusNotFound).JSON(wire.LookupMiss{
			Error: wire.ErrorObject{Code: "not_found", Message: fmt.Sprintf(
				"No entry for this signature (key %s) in namespace %q.", key, ns), RequestID: answeredRequestID(c)},
			Key: key.String(), Backend: res.Backend, Plugin: res.Plugin,
			DisplayName: res.DisplayName, Components: res.Components, Explanation: ex,
		})
	}
	if err != nil {
		return err
	}
	g.io.headers(c, m)
	c.Status(http.StatusOK)
	hit := Lookup{Route: RouteLookup, Namespace: ns, Key: key, Run: r.Run, Anonymous: r.Anonymous, Writer: r.Writer, Hit: true,
		Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds, Bytes: m.Size}
	// A hit once the whole body was read (streams.send), never on a
	// corrupt chunk.
	return g.io.send(c, ns, key, rc, m.Size, g.out, hit)
}
