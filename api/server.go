// Package api serves cachesvc's v1 HTTP API on fiber.
//
// The server is a set of feature groups — entries (entries.go), keys and
// lookup (keys.go), batch and exists (batch.go), leases and runs
// (leases.go), stats and the dashboard (stats.go), admin (admin.go) — each
// owning its handlers and declaring its routes with their access rule in
// one place. The route table (routes.go) is the only source of
// authorization (auth.go) and of the OpenAPI document's check. Every
// request's input is parsed and validated once into one value (request.go);
// every outcome is reported once to Outcomes (outcomes.go), which feeds the
// statistics and the Prometheus metrics. Errors are translated to JSON in
// one place (errors.go); bodies stream end to end (body.go, entrybody.go).
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/proxyaddr"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Store is what the API needs of the entry store: *store.Badger, and any
// tier that wraps one, implement it. See store.Store for the contract of
// each method.
type Store interface {
	Put(ctx context.Context, ns string, key cachekey.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error)
	Get(ctx context.Context, ns string, key cachekey.Key, off, n int64) (store.Meta, io.ReadCloser, error)
	Stat(ctx context.Context, ns string, key cachekey.Key) (store.Meta, error)
	Delete(ctx context.Context, ns string, key cachekey.Key) error
	Walk(ctx context.Context, ns string, fn func(store.Meta) bool) error
	Usage() store.Usage
}

// Walker lists entries; see store.Store's Walk.
type Walker interface {
	Walk(ctx context.Context, ns string, fn func(store.Meta) bool) error
}

// Config configures a Server. The zero value of every field except Store
// means its default.
type Config struct {
	// Store holds the entries. Required. The server does not close it.
	Store Store

	// Seed is walked at start to admit the namespaces that hold entries
	// into the statistics and to index entries' components for explaining
	// misses. Nil means Store; a fleet replica passes its hot tier, so that
	// a start does not list the shared bucket.
	Seed Walker

	// Logger receives request and lifecycle logs. Nil discards them.
	Logger *slog.Logger

	// MaxEntryBytes rejects an entry larger than this many bytes with 413,
	// before reading it when the request declares its Content-Length and
	// while streaming otherwise. 0 means no limit beyond the store's own.
	MaxEntryBytes int64

	// MaxJSONBytes bounds JSON request bodies. 0 means 4 MiB.
	MaxJSONBytes int64

	// Registry receives the server's Prometheus metrics and is what /metrics
	// serves. Nil means a new registry owned by the server (never the global
	// one, so two servers can live in one process).
	Registry *prometheus.Registry

	// IdleTimeout closes keep-alive connections idle this long. 0 means 2m.
	IdleTimeout time.Duration

	// Version is reported by /healthz and /v1/stats. Empty means "dev".
	Version string

	// Auth checks bearer tokens against the tokens file. Nil means no
	// authentication: every request is allowed.
	Auth *auth.Guard

	// Signer, when set, signs every entry response (X-Cachesvc-Signature).
	Signer *auth.Signer

	// TLS, when set, serves HTTPS (and mutual TLS if it requires client
	// certificates).
	TLS *tls.Config

	// Limits are timeouts, rates and bounds (limits.go).
	Limits Limits

	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (clientaddr.go): the address that rate limits, upload
	// places, anonymous reporters and an unauthenticated writer count by.
	// Nil believes no header: the client is the connection's peer.
	TrustedProxies *proxyaddr.Trusted

	// Leases bounds the compile lease table. Zero means defaults.
	Leases lease.Config

	// Runs configures run manifests: bounds, expiry and snapshot file. Zero
	// means defaults, kept in memory only.
	Runs manifest.Config

	// Stats counts every lookup and write, explains misses and backs GET
	// /v1/stats, /v1/{ns}/stats, /v1/{ns}/misses and the lookup counters of
	// /metrics. The server does not close it. Nil means statistics kept in
	// memory for the life of the server.
	Stats *stats.Stats

	// Keyer computes keys from signatures for POST /v1/{ns}/keys and
	// /v1/{ns}/lookup. Nil answers those routes with 501.
	Keyer *keying.Keyer

	// NoDigestLookups makes keys and lookup ignore
	// X-Cachesvc-Signature-Sha256, as a server that predates digest-first
	// lookups does (clients then always send the signature). For
	// compatibility tests and as an escape hatch.
	NoDigestLookups bool

	// Fleet, on a replica of a fleet, reports every replica's health and
	// the fleet's merged statistics (GET /v1/stats?scope=fleet). Nil means
	// a server on its own.
	Fleet FleetView

	// SharedTier, on a replica of a fleet, reports its view of the shared
	// tier for /readyz, /v1/stats and the dashboard. It must not do I/O.
	SharedTier func() wire.SharedTierState

	// QuarantineAfter is how many distinct reporters must report an entry
	// as unloadable before it is quarantined (1 to store.MaxReporters); a
	// report from an admin token quarantines at once. 0 means
	// DefaultQuarantineAfter.
	QuarantineAfter int

	// Touch, when set, is told of every entry served (a hit on any route, or
	// an upload of an entry that already existed), for the fleet's access
	// log that gc reads. It must not block.
	Touch func(ns string, key cachekey.Key)
}

// FleetView is the fleet's view of itself (fleet/registry).
type FleetView interface {
	Fleet(ctx context.Context) (wire.FleetStats, error)
}

// Server is the HTTP API. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	app   *fiber.App
	table []Route

	http *httpMetrics // requests, durations, body bytes (metrics.go)
	sec  *security    // limiters and their metrics (limits.go)
	out  Outcomes     // every lookup and write, counted once
	ids  *requestIDs  // ids of requests that came without one (requestid.go)
	// outages throttles the request lines of outage codes (outagelog.go).
	outages outageLog
	io      *streams       // response bodies in flight (entrybody.go)
	own     []func() error // what New opened and Shutdown closes

	leases *lease.Table
	runs   *manifest.Recorder

	// baseCtx is the parent of every request's context; Shutdown cancels it
	// when the grace period ends, aborting in-flight uploads.
	baseCtx context.Context
	cancel  context.CancelFunc

	inflight atomic.Int64 // requests inside a handler, and response bodies streaming
	closing  atomic.Bool  // set by Shutdown; /readyz then fails
	draining atomic.Bool  // set by Drain; /readyz fails while everything is still served

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open connections, closed on forced shutdown
	lns   []net.Listener        // what Serve was given, closed by Shutdown

	// expectRefused maps the header of a request with "Expect:
	// 100-continue" refused from its headers to its Content-Length
	// (expect.go), from when its headers arrive until its handler runs.
	expectRefused sync.Map
	expectMarks   atomic.Int64 // entries in expectRefused

	// perAddr counts the open connections by client address
	// (MaxConnsPerAddr); refusalLogged and refusedSinceLog throttle the
	// log of the refusals at each limit (indexed as refusals). All under
	// mu.
	perAddr         map[string]int
	refusalLogged   [2]time.Time
	refusedSinceLog [2]int

	refusing chan struct{}  // refusals of connections past a limit under way (connlimit.go)
	refusals [2]connRefusal // at MaxConns, at MaxConnsPerAddr
}

// New returns a Server for cfg with every route registered. It fails if
// cfg.Store is nil or the metrics cannot be registered.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("new api server: Config.Store is required")
	}
	if cfg.QuarantineAfter > store.MaxReporters {
		return nil, fmt.Errorf("new api server: QuarantineAfter %d is over the %d distinct reporters an entry keeps; use 1 to %d",
			cfg.QuarantineAfter, store.MaxReporters, store.MaxReporters)
	}
	if p := cfg.Limits.IPv6ClientPrefix; p < 0 || p > 128 {
		return nil, fmt.Errorf("new api server: Limits.IPv6ClientPrefix %d is not a prefix length; use 1 to 128 (0 = 128, each IPv6 address alone)", p)
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, conns: make(map[net.Conn]struct{}), ids: newRequestIDs()}
	s.outages.every = defaultOutageLogEvery
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	if err := s.init(); err != nil {
		s.closeOwned()
		return nil, fmt.Errorf("new api server: %w", err)
	}
	return s, nil
}

// withDefaults fills in the zero fields other than Stats.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MaxJSONBytes <= 0 {
		cfg.MaxJSONBytes = 4 << 20
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Seed == nil {
		cfg.Seed = cfg.Store
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.QuarantineAfter <= 0 {
		cfg.QuarantineAfter = DefaultQuarantineAfter
	}
	return cfg
}

// init builds the server's parts and registers the routes.
func (s *Server) init() error {
	cfg := &s.cfg
	if cfg.Stats == nil {
		st, err := stats.Open(stats.Config{Logger: cfg.Logger})
		if err != nil {
			return fmt.Errorf("open in-memory stats: %w", err)
		}
		cfg.Stats = st
		s.own = append(s.own, st.Close)
	}
	var err error
	if s.http, err = newHTTPMetrics(cfg.Registry, cfg.Store, cfg.Stats, cfg.Version); err != nil {
		return err
	}
	if s.sec, err = newSecurity(cfg); err != nil {
		return err
	}
	if err := s.initConnLimit(); err != nil {
		return err
	}
	cnt, err := newCounter(cfg.Stats, cfg.Touch, cfg.Registry)
	if err != nil {
		return fmt.Errorf("register lookup metrics: %w", err)
	}
	s.out = cnt
	s.io = &streams{inflight: &s.inflight, bytesOut: s.http.bytesOut, signer: cfg.Signer, panics: s.http.panics, log: s.log}
	if err := s.initLeasesAndRuns(); err != nil {
		return err
	}
	if err := s.initStats(); err != nil {
		return err
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "cachesvc",
		DisableStartupMessage: true,
		StreamRequestBody:     true,
		// With StreamRequestBody the limit only decides how much of a body
		// fasthttp prefetches (at most 8 KiB); larger bodies are streamed
		// and limited by the handlers (MaxEntryBytes, MaxJSONBytes).
		BodyLimit:   64 << 10,
		IdleTimeout: cfg.IdleTimeout,
		// Timeouts are paced by bytes moved (limits.go, secureListener).
		ReadTimeout:    cfg.Limits.ReadTimeout,
		WriteTimeout:   cfg.Limits.WriteTimeout,
		ReadBufferSize: cfg.Limits.MaxHeaderBytes,
		// Headers and a small body (up to 64 KiB is sent from memory,
		// entrybody.go) leave in one write instead of one per 4 KiB.
		WriteBufferSize: 16 << 10,
		ErrorHandler:    s.errorHandler,
		// Params and headers are copied where they outlive the handler
		// (request.go).
		Immutable: false,
	})
	// fasthttp quotes up to 400 bytes of a request's header block or a
	// chunked body's trailer in its parse errors, which reach error bodies
	// and logs: a token among them would be shown to anyone reading either.
	s.app.Server().SecureErrorLogMessage = true
	s.catchShortBodies()
	s.catchUnknownMethods()
	s.refuseTransferCodings()
	s.answerHTTP10CloseDelimited()
	s.refuseExpectEarly() // outermost: it restores what the others read
	s.app.Use(s.middleware)
	// A handler's panic (a bug) costs its request a 500, not the process:
	// the error reaches the middleware above like any other, so the
	// request is still counted and logged.
	s.app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: s.logPanic}))
	unknownFields, err := newUnknownFieldsCounter(cfg.Registry)
	if err != nil {
		return err
	}
	body := bodies{maxJSON: cfg.MaxJSONBytes, bytesIn: s.http.bytesIn, unknownFields: unknownFields, log: s.log}
	reports, err := newReportsCounter(cfg.Registry)
	if err != nil {
		return err
	}
	q, _ := cfg.Store.(Quarantiner)
	digests := withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cachesvc_signature_digest_requests_total",
		Help: "Keys and lookup requests that named their signature by X-Cachesvc-Signature-Sha256, by outcome: known (answered from the memo without the signature), unknown (428: the client sends the signature), mismatch (400).",
	}, []string{"outcome"}), "known", "unknown", "mismatch")
	if err := cfg.Registry.Register(digests); err != nil {
		return fmt.Errorf("register signature digest metrics: %w", err)
	}
	var sigmem *sigMemory
	if cfg.Keyer != nil {
		if err := cfg.Registry.Register(newMemoMetrics(cfg.Keyer)); err != nil {
			return fmt.Errorf("register signature memo metrics: %w", err)
		}
		if sigmem, err = newSigMemory(cfg.Keyer.MaxSignatureBytes(), s.sec.rejected.WithLabelValues("signature_memory"), cfg.Registry); err != nil {
			return err
		}
	}
	err = s.register(
		&quarantineAPI{q: q, threshold: cfg.QuarantineAfter, body: body, auth: cfg.Auth, reports: reports, stats: cfg.Stats, log: s.log, ipv6Bits: cfg.Limits.IPv6ClientPrefix},
		&adminAPI{store: cfg.Store, keyer: cfg.Keyer, metrics: s.metricsHandler(), closing: &s.closing, draining: &s.draining, version: cfg.Version,
			shared: cfg.SharedTier, stats: cfg.Stats, log: s.log},
		&statsAPI{store: cfg.Store, stats: cfg.Stats, leases: s.leases, version: cfg.Version, fleet: cfg.Fleet, shared: cfg.SharedTier},
		&entriesAPI{store: cfg.Store, out: s.out, io: s.io, leases: s.leases, runs: s.runs, keyer: cfg.Keyer,
			maxEntry: cfg.MaxEntryBytes, bytesIn: s.http.bytesIn, log: s.log},
		&batchAPI{store: cfg.Store, out: s.out, io: s.io, runs: s.runs, body: body, baseCtx: s.baseCtx, log: s.log},
		&keysAPI{store: cfg.Store, out: s.out, io: s.io, runs: s.runs, keyer: cfg.Keyer, stats: cfg.Stats, bytesIn: s.http.bytesIn,
			digests: digests, noDigest: cfg.NoDigestLookups, sigmem: sigmem},
		&leasesAPI{store: cfg.Store, leases: s.leases, runs: s.runs, body: body, log: s.log},
		&adminEntriesAPI{store: cfg.Store, io: s.io, maxEntry: cfg.MaxEntryBytes, bytesIn: s.http.bytesIn, baseCtx: s.baseCtx, log: s.log},
	)
	if err != nil {
		return err
	}
	exportUnknownFieldSeries(unknownFields, s.table)
	return nil
}

// closeOwned closes what New opened for the server itself.
func (s *Server) closeOwned() {
	for _, c := range s.own {
		if err := c(); err != nil {
			s.log.Error("close server resource", "err", err)
		}
	}
	s.own = nil
}

// App returns the underlying fiber app, for tests.
func (s *Server) App() *fiber.App { return s.app }

// Outcomes returns what the server counts every lookup and write with, for
// listeners beside it (api/resp) whose traffic must show in the same
// statistics and metrics.
func (s *Server) Outcomes() Outcomes { return s.out }

// Registry returns the Prometheus registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.cfg.Registry }

// Listen serves on addr until Shutdown.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.Serve(ln)
}

// Serve serves on ln until Shutdown. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	// A Shutdown that runs before fasthttp has taken ln would not stop it:
	// Shutdown also closes every listener handed to Serve, and a Serve
	// called after Shutdown returns at once.
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ln.Close()
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	if err := s.app.Listener(&trackingListener{Listener: s.secureListener(ln), s: s}); err != nil {
		if s.closing.Load() {
			return nil // closed by Shutdown
		}
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// closeListeners closes the listeners handed to Serve, once closing is set.
func (s *Server) closeListeners() {
	s.mu.Lock()
	lns := s.lns
	s.lns = nil
	s.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
}

// Drain makes /readyz answer 503 shutting_down, and every response close
// its connection, while the server goes on serving everything else: a load
// balancer that probes /readyz stops sending new requests, and clients on
// kept-alive connections reconnect (through it, to another replica), before
// Shutdown closes the listener. Without it, SIGTERM closed the listener at
// once, and requests routed in the balancer's probe interval were refused.
// /healthz stays 200: a liveness probe must not kill a draining process.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops accepting connections and waits for in-flight requests to
// finish until ctx ends. Then it cancels what is still running (an upload
// cut short stores nothing), aborts the remaining connections and waits up
// to five more seconds for their handlers and response bodies to end. After
// Shutdown returns no handler touches the store, so the caller may close it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	s.mu.Unlock()
	s.leases.Close() // end long polls now
	defer s.closeOwned()
	defer s.closeRuns()
	err := s.app.ShutdownWithContext(ctx)
	s.closeListeners()
	if err == nil && s.inflight.Load() == 0 {
		s.cancel()
		return nil
	}
	s.log.Warn("shutdown grace period over; aborting in-flight requests", "inflight", s.inflight.Load())
	s.cancel()
	s.abortConns()
	deadline := time.Now().Add(5 * time.Second)
	for s.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.inflight.Load(); n > 0 {
		return fmt.Errorf("shut down api server: %d requests still running", n)
	}
	return nil
}
