// Package resp serves cachesvc's entries over the Redis protocol (RESP2 and
// RESP3), so that stock PyTorch (torch._inductor's RedisRemoteCacheBackend)
// and Triton's Redis backend use the cache with no code: point
// TORCHINDUCTOR_REDIS_URL at the listener.
//
// The listener speaks GET, SET, MGET, EXISTS, PING, ECHO, AUTH, HELLO,
// CLIENT (SETINFO, SETNAME, GETNAME, ID), SELECT 0 and QUIT. Every Redis key
// maps to an entry of one namespace: the server key is the key the built-in
// pt2 plugin computes for the signature {"backend":"pt2","key":<redis key>}
// (the Keyer memoizes it). Reads and writes go through the same api.Store and are counted
// through the same api.Outcomes as the HTTP API, and AUTH takes a cachesvc
// bearer token checked by the same auth.Guard.
//
// Commands are framed by redcon's ReadNextCommand over a buffer this package
// owns and bounds (conn.go): a command may be at most the value limit plus a
// little, all connections together hold at most Config.MaxBufferedBytes,
// and a connection past either limit gets an error and is closed.
package resp

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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/store"
)

// Defaults for Config's zero values.
const (
	// DefaultNamespace holds the listener's entries.
	DefaultNamespace = "default"
	// DefaultMaxValueBytes bounds a SET value.
	DefaultMaxValueBytes = 256 << 20
	// DefaultMaxConns bounds open connections.
	DefaultMaxConns = 256
	// DefaultMaxBufferedBytes bounds the command bytes all connections hold.
	DefaultMaxBufferedBytes = 1 << 30
	// DefaultMaxKeys bounds the keys of one MGET or EXISTS.
	DefaultMaxKeys = 1024
	// DefaultMaxKeyBytes bounds a Redis key (the pt2 plugin's own bound).
	DefaultMaxKeyBytes = 4096
	// DefaultIdleTimeout closes a connection that sends no command.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultBackend is the signature backend that maps Redis keys.
	DefaultBackend = "pt2"
)

// Store is what the listener needs of the entry store: a subset of
// api.Store.
type Store interface {
	Put(ctx context.Context, ns string, key cachekey.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error)
	Get(ctx context.Context, ns string, key cachekey.Key, off, n int64) (store.Meta, io.ReadCloser, error)
	Stat(ctx context.Context, ns string, key cachekey.Key) (store.Meta, error)
}

// Config configures a Server. Store, Outcomes and Keyer are required; the
// zero value of every other field means its default.
type Config struct {
	// Store holds the entries; the server does not close it.
	Store Store
	// Outcomes receives every GET/MGET lookup and SET write, once each
	// (api.Server.Outcomes).
	Outcomes api.Outcomes
	// Keyer maps Redis keys to server keys through Backend's plugin.
	Keyer *keying.Keyer
	// Auth checks the tokens AUTH and HELLO ... AUTH present. Nil means no
	// authentication: every command is allowed and AUTH is accepted.
	Auth *auth.Guard
	// TLS, when set, serves RESP over TLS (rediss://).
	TLS *tls.Config
	// Registry receives the listener's metrics. Nil means none are
	// registered.
	Registry prometheus.Registerer
	// Logger receives connection and error logs. Nil discards them.
	Logger *slog.Logger
	// Version is reported by HELLO. Empty means "dev".
	Version string

	// Namespace holds every key of the listener. Empty means "default".
	Namespace string
	// Backend is the signature backend that maps keys ("pt2").
	Backend string
	// Signature builds the signature of a Redis key for Keyer. Nil means
	// {"backend": Backend, "key": key}, the pt2 plugin's contract.
	Signature func(key string) []byte

	// MaxValueBytes bounds a SET value (default 256 MiB).
	MaxValueBytes int64
	// MaxConns bounds open connections; one more is answered "ERR max
	// number of clients reached" and closed (default 256).
	MaxConns int
	// MaxBufferedBytes bounds the command bytes all connections hold at
	// once while receiving them (default 1 GiB, at least MaxValueBytes plus
	// a command's overhead).
	MaxBufferedBytes int64
	// MaxKeys bounds the keys of one MGET or EXISTS (default 1024).
	MaxKeys int
	// MaxKeyBytes bounds a Redis key (default 4096).
	MaxKeyBytes int
	// IdleTimeout closes a connection that sends no command for this long
	// (default 10m; negative means never).
	IdleTimeout time.Duration
	// ReadTimeout is the time a command may take to arrive beyond its size
	// at MinTransferRate, and WriteTimeout the same for a reply (default
	// 30s each).
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MinTransferRate is the slowest transfer tolerated, bytes per second
	// (default 64 KiB/s; negative means fixed timeouts).
	MinTransferRate int64
}

// withDefaults fills in the zero fields.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Backend == "" {
		cfg.Backend = DefaultBackend
	}
	if cfg.MaxValueBytes <= 0 {
		cfg.MaxValueBytes = DefaultMaxValueBytes
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MinTransferRate == 0 {
		cfg.MinTransferRate = 64 << 10
	}
	return cfg
}

// commandLimit is the largest command a connection may send: a SET of the
// largest value and key with options, or an MGET of the most keys.
func (cfg *Config) commandLimit() int64 {
	return max(cfg.MaxValueBytes+int64(cfg.MaxKeyBytes)+1024, int64(cfg.MaxKeys)*int64(cfg.MaxKeyBytes+16)+1024)
}

// CommandBytes is the largest command a connection of a server with cfg
// may send (defaults applied): Config.MaxBufferedBytes must hold it, or
// New refuses the config.
func CommandBytes(cfg Config) int64 {
	cfg = cfg.withDefaults()
	return cfg.commandLimit()
}

// Server is the Redis-protocol listener. Create it with New; it is safe for
// concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	keys     *keyMap
	limit    int64        // the largest command, commandLimit
	buffered atomic.Int64 // command bytes held by all connections
	nextID   atomic.Int64 // connection ids, for CLIENT ID and HELLO

	// baseCtx is the parent of every command's context; Shutdown cancels
	// it when the grace period ends, so that a SET cut short stores nothing.
	baseCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // connection goroutines

	mu      sync.Mutex
	closing bool
	lns     []net.Listener
	conns   map[*conn]struct{}
	perHost map[string]int // open connections per client address (its IP)
}

// New returns a Server for cfg. It fails if a required field is missing,
// a limit is inconsistent or the metrics cannot be registered.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("new resp server: Config.Store is required")
	case cfg.Outcomes == nil:
		return nil, errors.New("new resp server: Config.Outcomes is required")
	case cfg.Keyer == nil:
		return nil, errors.New("new resp server: Config.Keyer is required")
	}
	cfg = cfg.withDefaults()
	if err := cachekey.ValidateNamespace(cfg.Namespace); err != nil {
		return nil, fmt.Errorf("new resp server: namespace: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, limit: cfg.commandLimit(), conns: map[*conn]struct{}{}, perHost: map[string]int{}}
	if cfg.MaxBufferedBytes < s.limit {
		return nil, fmt.Errorf("new resp server: the buffer limit (%d bytes) is smaller than one command of the largest value (%d bytes)",
			cfg.MaxBufferedBytes, s.limit)
	}
	var err error
	if s.metrics, err = newMetrics(cfg.Registry, s); err != nil {
		return nil, fmt.Errorf("new resp server: register metrics: %w", err)
	}
	s.keys = newKeyMap(&s.cfg)
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Namespace returns the namespace the listener serves.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// Serve accepts connections on ln until Shutdown and serves each on its own
// goroutine. It closes ln. It returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ln.Close()
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	defer ln.Close()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors or a transient failure: back off
				// as net/http does rather than spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("resp accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("resp accept on %s: %w", ln.Addr(), err)
		}
		delay = 0
		s.accept(nc)
	}
}

// accept admits nc under the connection limit and starts serving it, or
// answers it with Redis's "max number of clients reached" and closes it.
func (s *Server) accept(nc net.Conn) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	host := hostOf(nc.RemoteAddr())
	if len(s.conns) >= s.cfg.MaxConns && !s.displaceLocked(host) {
		s.mu.Unlock()
		s.metrics.refused.Inc()
		s.log.Warn("resp connection refused: too many connections", "client", host, "max_conns", s.cfg.MaxConns)
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(nc, "-ERR max number of clients reached\r\n")
		_ = nc.Close()
		return
	}
	c := newConn(s, nc)
	c.host = host
	s.conns[c] = struct{}{}
	s.perHost[host]++
	s.wg.Add(1)
	s.mu.Unlock()
	s.metrics.accepted.Inc()
	go func() {
		defer s.wg.Done()
		defer s.forget(c)
		c.serve()
	}()
}

// forget removes a finished connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	s.dropLocked(c)
	s.mu.Unlock()
}

// dropLocked removes c from the open connections, once.
func (s *Server) dropLocked(c *conn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.perHost[c.host]--; s.perHost[c.host] <= 0 {
		delete(s.perHost, c.host)
	}
}

// displaceLocked makes room, when every connection place is taken, for a
// connection from host holding less than half of them, by closing an idle
// connection of the address holding more than half. A client needs no
// token to open connections and an idle one lasts IdleTimeout, so without
// it one address could hold every place and lock every other host out. It
// reports whether it made room; a busy connection is never closed.
func (s *Server) displaceLocked(host string) bool {
	if 2*s.perHost[host] >= s.cfg.MaxConns {
		return false
	}
	for c := range s.conns {
		if 2*s.perHost[c.host] > s.cfg.MaxConns && c.closeIfIdle() {
			s.log.Warn("resp connection closed to make room for another address", "client", c.client(),
				"address_conns", s.perHost[c.host], "max_conns", s.cfg.MaxConns)
			s.dropLocked(c)
			return true
		}
	}
	return false
}

// hostOf is the IP of a client address, or the whole address when it has
// no port.
func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown stops accepting, closes idle connections at once and lets each
// busy one finish the commands it has received until ctx ends; then it
// cancels what is still running (a SET cut short stores nothing) and closes
// every connection. After Shutdown returns no command touches the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	lns := s.lns
	s.lns = nil
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.shutdown()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.log.Warn("resp shutdown grace period over; aborting connections")
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("shut down resp server: connections still running")
	}
}
