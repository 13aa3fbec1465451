// Package api serves cachesvc's v1 HTTP API on fiber.
//
// The server streams request and response bodies end to end, translates the
// store's sentinel errors to JSON errors in one place (errors.go), and
// registers every route in one table (routes.go). Each feature's handlers live
// in their own file.
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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/store"
)

// Config configures a Server. The zero value of every field except Store
// means its default.
type Config struct {
	// Store holds the entries. Required. The server does not close it.
	Store store.Store

	// Logger receives request and lifecycle logs. Nil discards them.
	Logger *slog.Logger

	// MaxEntryBytes rejects an entry larger than this many bytes with 413,
	// before reading it when the request declares its Content-Length and
	// while streaming otherwise. 0 means no limit beyond the store's own.
	MaxEntryBytes int64

	// MaxJSONBytes bounds JSON request bodies read with readBody/decodeJSON.
	// 0 means 4 MiB.
	MaxJSONBytes int64

	// Registry receives the server's Prometheus metrics and is what /metrics
	// serves. Nil means a new registry owned by the server (never the global
	// one, so two servers can live in one process).
	Registry *prometheus.Registry

	// IdleTimeout closes keep-alive connections idle this long. 0 means 2m.
	IdleTimeout time.Duration

	// Version is reported by /healthz. Empty means "dev".
	Version string

	// Auth checks bearer tokens against the tokens file (auth.go). Nil
	// means no authentication: every request is allowed.
	Auth *auth.Guard

	// Signer, when set, signs every entry response (X-Cachesvc-Signature,
	// provenance.go).
	Signer *auth.Signer

	// TLS, when set, serves HTTPS (and mutual TLS if it requires client
	// certificates).
	TLS *tls.Config

	// Limits are timeouts, rates and bounds (limits.go).
	Limits Limits

	// Leases bounds the compile lease table (leases.go). Zero means defaults.
	Leases lease.Config

	// Runs configures run manifests (runs.go): bounds, expiry and snapshot
	// file. Zero means defaults, kept in memory only.
	Runs manifest.Config

	// Stats, when set, counts every lookup and write, explains misses and
	// backs GET /v1/stats, /v1/{ns}/stats, /v1/{ns}/misses and the persisted
	// /metrics counters (stats.go). Nil keeps process-lifetime totals only.
	// The server does not close it.
	Stats *stats.Stats

	// Keyer computes keys from signatures for POST /v1/{ns}/keys and
	// /v1/{ns}/lookup (keys.go). Nil answers those routes with 501.
	Keyer *keying.Keyer
}

// Server is the HTTP API. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	app     *fiber.App
	metrics *metrics
	totals  *totals

	// baseCtx is the parent of every request's context; Shutdown cancels it
	// when the grace period ends, aborting in-flight uploads.
	baseCtx context.Context
	cancel  context.CancelFunc

	inflight atomic.Int64 // requests inside a handler, and response bodies streaming
	closing  atomic.Bool  // set by Shutdown; /readyz then fails

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open connections, closed on forced shutdown

	sec *security // auth and limits state (limits.go)

	leases *lease.Table       // compile leases (leases.go)
	runs   *manifest.Recorder // run manifests (runs.go)
}

// New returns a Server for cfg with every route registered. It fails if
// cfg.Store is nil or the metrics cannot be registered.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("new api server: Config.Store is required")
	}
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
	cfg.Limits = cfg.Limits.withDefaults()
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		totals: &totals{},
		conns:  make(map[net.Conn]struct{}),
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	m, err := newMetrics(cfg.Registry, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	s.metrics = m
	if err := s.initLeasesAndRuns(); err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	if err := s.initStats(); err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
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
		// entries.go) leave in one write instead of one per 4 KiB.
		WriteBufferSize: 16 << 10,
		ErrorHandler:    s.errorHandler,
		// Params and headers are copied where they outlive the handler.
		Immutable: false,
	})
	if s.sec, err = newSecurity(cfg); err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	s.app.Use(s.middleware, s.authorize, s.limitRequests)
	s.routes()
	return s, nil
}

// App returns the underlying fiber app, for tests and for mounting extra
// routes before serving.
func (s *Server) App() *fiber.App { return s.app }

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
	if err := s.app.Listener(&trackingListener{Listener: s.secureListener(ln), s: s}); err != nil {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests to
// finish until ctx ends. Then it cancels what is still running (an upload
// cut short stores nothing), aborts the remaining connections and waits up
// to five more seconds for their handlers and response bodies to end. After Shutdown returns no
// handler touches the store, so the caller may close it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.leases.Close() // end long polls now (leases.go)
	defer s.saveRunsLogged()
	err := s.app.ShutdownWithContext(ctx)
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

// abortConns makes every open connection fail its reads and writes now, so
// that a handler blocked on a slow upload, or a download in progress, ends
// with an error. (Closing the connection under fasthttp instead would make it
// panic when it next sets a deadline.)
func (s *Server) abortConns() {
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		if tc, ok := c.(*trackedConn); ok {
			conns = append(conns, tc)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.aborted.Store(true)
		_ = c.Conn.SetDeadline(time.Now())
	}
}

// trackingListener records accepted connections so that a forced shutdown can
// close them.
type trackingListener struct {
	net.Listener
	s *Server
}

// Accept accepts a connection and tracks it until it is closed.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s}
	l.s.mu.Lock()
	l.s.conns[tc] = struct{}{}
	l.s.mu.Unlock()
	return tc, nil
}

// trackedConn removes itself from the server's set when closed, remembers
// whether the peer closed its side (see bodyReader), and fails every read and
// write once a forced shutdown aborts it.
type trackedConn struct {
	net.Conn
	s       *Server
	once    sync.Once
	sawEOF  atomic.Bool
	aborted atomic.Bool
}

// errAborted is what reads and writes return on a connection aborted by a
// forced shutdown.
var errAborted = errors.New("connection aborted: server shutting down")

// Read reads from the connection, noting io.EOF: fasthttp reports a chunked
// body cut short at a chunk boundary as a clean io.EOF, and this is how
// bodyReader tells the two apart.
func (c *trackedConn) Read(p []byte) (int, error) {
	if c.aborted.Load() {
		return 0, errAborted
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.sawEOF.Store(true)
	}
	if err == nil && c.aborted.Load() {
		err = errAborted
	}
	return n, err
}

// Write writes to the connection unless it was aborted.
func (c *trackedConn) Write(p []byte) (int, error) {
	if c.aborted.Load() {
		return 0, errAborted
	}
	return c.Conn.Write(p)
}

// SetDeadline, SetReadDeadline and SetWriteDeadline keep an aborted
// connection's deadline in the past.
func (c *trackedConn) SetDeadline(t time.Time) error {
	if c.aborted.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline unless the connection was aborted.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if c.aborted.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline unless the connection was aborted.
func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	if c.aborted.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection and forgets it.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
