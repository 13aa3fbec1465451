package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// leasesAPI serves compile leases and run manifests: what lets N hosts
// compile a program once, and a sweep's next arm warm from the first.
type leasesAPI struct {
	store  Store
	leases *lease.Table
	runs   *manifest.Recorder
	body   bodies
	log    *slog.Logger
}

// routes declares the lease and run routes.
func (g *leasesAPI) routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/:ns/leases/:key", Access: writeNS, JSONBody: true, Handler: g.handleAcquire},
		{Method: http.MethodDelete, Path: "/v1/:ns/leases/:key", Access: writeNS, JSONBody: true, Handler: g.handleRelease},
		{Method: http.MethodGet, Path: "/v1/:ns/runs/:run/manifest", Access: readNS, Handler: g.handleRunManifest},
	}
}

// Lease limits.
const (
	// DefaultLeaseTTL is the lease duration when a request gives no ttl_s.
	DefaultLeaseTTL = 60 * time.Second
	// MaxLeaseTTL bounds ttl_s; a holder compiling longer renews.
	MaxLeaseTTL = time.Hour
)

// initLeasesAndRuns creates the lease table and the run recorder and
// registers their gauges. Called once by New.
func (s *Server) initLeasesAndRuns() error {
	s.leases = lease.New(s.cfg.Leases)
	runs, err := manifest.New(s.cfg.Runs)
	if err != nil {
		return fmt.Errorf("open run manifests: %w", err)
	}
	s.runs = runs
	if s.cfg.Runs.Path != "" {
		go s.saveRunsEvery(s.baseCtx, 30*time.Second)
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cachesvc_leases_held", Help: "Compile leases currently held."},
			func() float64 { h, _ := s.leases.Counts(); return float64(h) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cachesvc_lease_waiters", Help: "Requests parked in GET ?wait= behind a lease."},
			func() float64 { _, w := s.leases.Counts(); return float64(w) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cachesvc_runs_recorded", Help: "Runs with a recorded manifest."},
			func() float64 { r, _ := s.runs.Counts(); return float64(r) }),
	}
	for _, gauge := range gauges {
		if err := s.cfg.Registry.Register(gauge); err != nil {
			return fmt.Errorf("register lease metrics: %w", err)
		}
	}
	return nil
}

// LeaseCounts returns the number of live compile leases and of waiters parked
// behind them.
func (s *Server) LeaseCounts() (held, waiting int) { return s.leases.Counts() }

// handleAcquireLease serves POST /v1/{ns}/leases/{key} {"holder", "ttl_s"}:
// 201 when the holder now owns the lease (new, or renewed: "renewed": true
// tells a second asker of one process that it already holds it), 409 with the
// current holder and expiry when someone else does, or when the entry
// already exists (holder empty: fetch it instead of compiling).
func (g *leasesAPI) handleAcquire(c *fiber.Ctx) error {
	ns, key := reqOf(c).Namespace, reqOf(c).Key
	var req wire.LeaseRequest
	if err := g.body.decodeJSON(c, &req, "holder"); err != nil {
		return err
	}
	if err := lease.ValidateHolder(req.Holder); err != nil {
		return Errorf(http.StatusBadRequest, "bad_holder", "\"holder\" must be 1 to %d bytes naming who compiles (e.g. host:pid), got %d bytes.", lease.MaxHolderLen, len(req.Holder))
	}
	ttl := DefaultLeaseTTL
	if req.TTL != nil {
		t := *req.TTL
		if !(t > 0) || t > MaxLeaseTTL.Seconds() {
			return Errorf(http.StatusBadRequest, "bad_ttl", "\"ttl_s\" must be a number of seconds above 0 and at most %d, got %v; renew a longer compile by posting again.", int(MaxLeaseTTL.Seconds()), t)
		}
		ttl = time.Duration(t * float64(time.Second))
	}
	if _, err := g.store.Stat(c.UserContext(), ns, key); err == nil {
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error": wire.ErrorObject{Code: "entry_exists", Message: fmt.Sprintf("Entry %s already exists in namespace %q: fetch it instead of compiling.", key, ns),
				RequestID: answeredRequestID(c)},
			"holder":  "",
			"expires": time.Time{},
		})
	} else if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("stat %s/%s: %w", ns, key, err)
	}
	// A shared tier that cannot be reached says nothing about the entry:
	// the lease fails open (the table decides locally), so that an S3
	// outage costs one compile per replica rather than a 503 per client.
	l, granted, err := g.leases.Acquire(c.UserContext(), ns, key, req.Holder, ttl)
	if errors.Is(err, lease.ErrTableFull) {
		return &Error{Status: http.StatusServiceUnavailable, Code: "lease_table_full",
			Message: sentence(err.Error() + "; compile without a lease"), Err: err}
	}
	if err != nil {
		return fmt.Errorf("acquire lease %s/%s: %w", ns, key, err)
	}
	if !granted {
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error": wire.ErrorObject{Code: "lease_held", Message: fmt.Sprintf("Holder %q is compiling %s until %s; wait with GET ?wait= or try again after that.",
				l.Holder, key, l.Expires.UTC().Format(time.RFC3339Nano)), RequestID: answeredRequestID(c)},
			"holder":  l.Holder,
			"expires": l.Expires,
		})
	}
	g.log.Debug("lease granted", "namespace", ns, "key", key.String(), "holder", l.Holder, "ttl", ttl)
	return c.Status(http.StatusCreated).JSON(wire.LeaseResponse{Holder: l.Holder, Expires: l.Expires, TTL: grantedSeconds(ttl, l.Granted), Renewed: l.Renewed})
}

// grantedSeconds is a 201's ttl_s: the seconds the lease was granted for,
// so that it agrees with expires. That is the ttl asked for, as asked,
// unless a renewal kept a later expiry (lease.Lease.Granted): then what is
// left of the lease, cut to the millisecond so as never to claim more.
func grantedSeconds(asked, granted time.Duration) float64 {
	if granted <= asked {
		return asked.Seconds()
	}
	return granted.Truncate(time.Millisecond).Seconds()
}

// handleReleaseLease serves DELETE /v1/{ns}/leases/{key}?holder=H (or the
// JSON body {"holder": H}): 204 released, 404 no lease, 409 held by another.
// Waiters get 404 and compile themselves.
func (g *leasesAPI) handleRelease(c *fiber.Ctx) error {
	ns, key := reqOf(c).Namespace, reqOf(c).Key
	holder := strings.Clone(c.Query("holder"))
	if holder == "" && len(c.Request().Header.ContentType()) > 0 {
		var req struct {
			Holder string `json:"holder"`
		}
		if err := g.body.decodeJSON(c, &req, "holder"); err != nil {
			return err
		}
		holder = req.Holder
	}
	if err := lease.ValidateHolder(holder); err != nil {
		return Errorf(http.StatusBadRequest, "bad_holder", "Name the holder releasing the lease with ?holder= or {\"holder\": ...} (1 to %d bytes).", lease.MaxHolderLen)
	}
	l, err := g.leases.Release(c.UserContext(), ns, key, holder)
	switch {
	case errors.Is(err, lease.ErrNotHeld):
		return Errorf(http.StatusNotFound, "lease_not_found", "No lease is held on %s in namespace %q (it was released, expired, or the server restarted).", key, ns)
	case errors.Is(err, lease.ErrHeldByOther):
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error": wire.ErrorObject{Code: "lease_held", Message: fmt.Sprintf("The lease on %s is held by %q, not %q.", key, l.Holder, holder),
				RequestID: answeredRequestID(c)},
			"holder":  l.Holder,
			"expires": l.Expires,
		})
	case err != nil:
		return fmt.Errorf("release lease %s/%s: %w", ns, key, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

// handleRunManifest serves GET /v1/{ns}/runs/{run}/manifest: the keys the
// run looked up and wrote, as
// {"run", "namespace", "created", "updated", "keys": [{"key", "name",
// "looked_up", "written"}], "truncated"}. A key recorded without a name (a
// lookup) gets the stored entry's name when the entry exists. 404
// unknown_run when no request carried the run recently.
func (g *leasesAPI) handleRunManifest(c *fiber.Ctx) error {
	ns, run := reqOf(c).Namespace, reqOf(c).RunParam
	m, err := g.runs.Manifest(c.UserContext(), ns, run)
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
			if meta, err := g.store.Stat(ctx, ns, key); err == nil {
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

// closeRuns saves the run manifests and, in a fleet, writes this replica's
// part of them to the shared tier a last time.
func (s *Server) closeRuns() {
	s.saveRunsLogged()
	if err := s.runs.Close(); err != nil {
		s.log.Error("flush run manifests to the shared tier", "err", err)
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
