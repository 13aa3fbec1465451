package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
)

// Lease and long-poll limits.
const (
	// DefaultLeaseTTL is the lease duration when a request gives no ttl_s.
	DefaultLeaseTTL = 60 * time.Second
	// MaxLeaseTTL bounds ttl_s; a holder compiling longer renews.
	MaxLeaseTTL = time.Hour
	// MaxWait bounds GET ?wait=.
	MaxWait = 300 * time.Second
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
	for _, g := range gauges {
		if err := s.cfg.Registry.Register(g); err != nil {
			return fmt.Errorf("register lease metrics: %w", err)
		}
	}
	return nil
}

// LeaseCounts returns the number of live compile leases and of waiters parked
// behind them.
func (s *Server) LeaseCounts() (held, waiting int) { return s.leases.Counts() }

// LeaseResponse is the JSON body of 201 and 409 answers to a lease request
// (409 adds an "error" object).
type LeaseResponse struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	TTL     float64   `json:"ttl_s,omitempty"`
}

type leaseRequest struct {
	Holder string   `json:"holder"`
	TTL    *float64 `json:"ttl_s"`
}

// handleAcquireLease serves POST /v1/{ns}/leases/{key} {"holder", "ttl_s"}:
// 201 when the holder now owns the lease (new or renewed), 409 with the
// current holder and expiry when someone else does, or when the entry
// already exists (holder empty: fetch it instead of compiling).
func (s *Server) handleAcquireLease(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	var req leaseRequest
	if err := s.decodeJSON(c, &req); err != nil {
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
	if _, err := s.cfg.Store.Stat(c.UserContext(), ns, key); err == nil {
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error":   errorObject{Code: "entry_exists", Message: fmt.Sprintf("Entry %s already exists in namespace %q: fetch it instead of compiling.", key, ns)},
			"holder":  "",
			"expires": time.Time{},
		})
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("stat %s/%s: %w", ns, key, err)
	}
	l, granted, err := s.leases.Acquire(ns, key, req.Holder, ttl)
	if errors.Is(err, lease.ErrTableFull) {
		return &Error{Status: http.StatusServiceUnavailable, Code: "lease_table_full",
			Message: sentence(err.Error() + "; compile without a lease"), Err: err}
	}
	if err != nil {
		return fmt.Errorf("acquire lease %s/%s: %w", ns, key, err)
	}
	if !granted {
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error": errorObject{Code: "lease_held", Message: fmt.Sprintf("Holder %q is compiling %s until %s; wait with GET ?wait= or try again after that.",
				l.Holder, key, l.Expires.UTC().Format(time.RFC3339Nano))},
			"holder":  l.Holder,
			"expires": l.Expires,
		})
	}
	s.log.Debug("lease granted", "namespace", ns, "key", key.String(), "holder", l.Holder, "ttl", ttl)
	return c.Status(http.StatusCreated).JSON(LeaseResponse{Holder: l.Holder, Expires: l.Expires, TTL: ttl.Seconds()})
}

// handleReleaseLease serves DELETE /v1/{ns}/leases/{key}?holder=H (or the
// JSON body {"holder": H}): 204 released, 404 no lease, 409 held by another.
// Waiters get 404 and compile themselves.
func (s *Server) handleReleaseLease(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	holder := strings.Clone(c.Query("holder"))
	if holder == "" && len(c.Request().Header.ContentType()) > 0 {
		var req struct {
			Holder string `json:"holder"`
		}
		if err := s.decodeJSON(c, &req); err != nil {
			return err
		}
		holder = req.Holder
	}
	if err := lease.ValidateHolder(holder); err != nil {
		return Errorf(http.StatusBadRequest, "bad_holder", "Name the holder releasing the lease with ?holder= or {\"holder\": ...} (1 to %d bytes).", lease.MaxHolderLen)
	}
	l, err := s.leases.Release(ns, key, holder)
	switch {
	case errors.Is(err, lease.ErrNotHeld):
		return Errorf(http.StatusNotFound, "lease_not_found", "No lease is held on %s in namespace %q (it was released, expired, or the server restarted).", key, ns)
	case errors.Is(err, lease.ErrHeldByOther):
		return c.Status(http.StatusConflict).JSON(fiber.Map{
			"error":   errorObject{Code: "lease_held", Message: fmt.Sprintf("The lease on %s is held by %q, not %q.", key, l.Holder, holder)},
			"holder":  l.Holder,
			"expires": l.Expires,
		})
	case err != nil:
		return fmt.Errorf("release lease %s/%s: %w", ns, key, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

// parseWait parses ?wait= as a Go duration ("60s", "1m") or plain seconds.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait=%q is not a duration: use e.g. wait=60s or wait=60 (seconds), at most %s.", v, MaxWait)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 || d > MaxWait {
		return 0, Errorf(http.StatusBadRequest, "bad_wait", "?wait=%s is out of range: it must be above 0 and at most %s.", v, MaxWait)
	}
	return d, nil
}

// entryHooks runs in front of the entries handlers. It validates and records
// X-Cachesvc-Run (GET/HEAD are lookups, a successful PUT a write), releases
// the compile lease when a PUT stores the entry, and implements GET ?wait=.
func (s *Server) entryHooks(c *fiber.Ctx) error {
	run, err := runHeader(c)
	if err != nil {
		return err
	}
	method := c.Method()
	if method == fiber.MethodGet && c.Query("wait") != "" {
		err = s.waitForEntry(c)
	}
	if err == nil {
		err = c.Next()
	}
	ns := c.Params("ns")
	key, kerr := cachekey.ParseKey(c.Params("key"))
	if kerr != nil || cachekey.ValidateNamespace(ns) != nil {
		return err
	}
	switch method {
	case fiber.MethodPut:
		if err == nil && c.Response().StatusCode() < 300 {
			ns = strings.Clone(ns)
			s.leases.Written(ns, key)
			if run != "" {
				s.runs.RecordWrite(ns, run, key, strings.Clone(c.Get(HeaderName)))
			}
		}
	case fiber.MethodGet, fiber.MethodHead:
		if run != "" {
			s.runs.RecordLookup(strings.Clone(ns), run, key)
		}
	}
	return err
}

// runHeader returns the request's validated X-Cachesvc-Run ("" when absent).
func runHeader(c *fiber.Ctx) (string, error) {
	run := c.Get(HeaderRun)
	if run == "" {
		return "", nil
	}
	if err := manifest.ValidateRun(run); err != nil {
		return "", &Error{Status: http.StatusBadRequest, Code: "bad_run", Message: sentence(HeaderRun + ": " + err.Error()), Err: err}
	}
	return strings.Clone(run), nil
}

// waitForEntry parks a GET ?wait= behind the entry's compile lease until the
// entry is written, the lease ends without it, or the wait runs out. It
// returns nil to let the GET handler answer (200 with the bytes, or its 404)
// and an error for a 404 that explains why the wait ended empty.
func (s *Server) waitForEntry(c *fiber.Ctx) error {
	d, err := parseWait(c.Query("wait"))
	if err != nil {
		return err
	}
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	present := func() bool {
		_, err := s.cfg.Store.Stat(ctx, ns, key)
		return err == nil
	}
	if present() {
		return nil
	}
	w, l, ok, err := s.leases.Wait(ns, key)
	if errors.Is(err, lease.ErrTooManyWaiters) {
		return &Error{Status: http.StatusServiceUnavailable, Code: "too_many_waiters", Message: sentence(err.Error() + "; retry later or compile yourself"), Err: err}
	}
	if err != nil || !ok {
		return nil // no lease: the handler answers now (404 unless just written)
	}
	defer s.leases.Cancel(w)
	if present() { // written between the first check and parking
		return nil
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	expiry := time.NewTimer(time.Until(l.Expires))
	defer expiry.Stop()
	for {
		select {
		case <-w.C():
			if w.Outcome() == lease.Written || present() {
				return nil
			}
			if w.Outcome() == lease.Closed {
				return Errorf(http.StatusServiceUnavailable, "shutting_down", "The server is shutting down; entry %s was not written yet.", key)
			}
			return Errorf(http.StatusNotFound, "not_found", "Entry %s was not written: holder %q %s the lease without it; compile it yourself.", key, l.Holder, w.Outcome())
		case <-expiry.C:
			if cur, held := s.leases.Holder(ns, key); held {
				l = cur // renewed, or taken over by a new holder: keep waiting
				expiry.Reset(time.Until(cur.Expires))
				continue
			}
			if present() {
				return nil
			}
			return Errorf(http.StatusNotFound, "not_found", "Entry %s was not written: the lease held by %q expired without it; compile it yourself.", key, l.Holder)
		case <-deadline.C:
			if present() {
				return nil
			}
			return Errorf(http.StatusNotFound, "wait_timeout", "Entry %s is still being compiled by %q (lease until %s) after waiting %s.", key, l.Holder, l.Expires.UTC().Format(time.RFC3339), d)
		case <-ctx.Done():
			return fmt.Errorf("wait for %s/%s: %w", ns, key, ctx.Err())
		}
	}
}
