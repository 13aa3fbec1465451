package api

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/limit"
)

// Limits are the server's protective limits. The zero value of each field
// means its default; a negative value turns the limit off where noted.
// None of them buffers a body.
type Limits struct {
	// ReadTimeout bounds reading a request's headers (and a TLS handshake);
	// it is also the slack a request body gets on top of MinTransferRate.
	// Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout is the slack a response gets on top of MinTransferRate.
	// Default 30s.
	WriteTimeout time.Duration
	// MinTransferRate, in bytes per second, stretches ReadTimeout and
	// WriteTimeout by the bytes moved: a body of n bytes may take the
	// timeout plus n/MinTransferRate, and a client slower than this for
	// longer than the timeout is cut off. Default 64 KiB/s; negative means
	// the timeouts are fixed, whole-request limits.
	MinTransferRate int64
	// MaxHeaderBytes bounds a request's header block (431 past it).
	// Default 16 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the HTTP connections open at once, idle keep-alive
	// ones included; one more is answered 503 too_many_connections with
	// Retry-After and closed, so that connections cannot take every file
	// descriptor the store needs. Default DefaultMaxConns(); negative means
	// no bound.
	MaxConns int
	// MaxConnsPerAddr bounds the connections open at once from one client
	// address, counted at accept, so that one host cannot take every
	// MaxConns place; one more from it is answered like one past MaxConns.
	// An IPv6 address counts alone, or by IPv6ClientPrefix (see
	// clientGroup).
	// Loopback addresses are not bounded: a reverse proxy or sidecar on the
	// same host, whose address every request it forwards shares. (A
	// forwarded client address is not known at accept.) Default half of
	// MaxConns (none when MaxConns is unbounded); negative means no bound.
	MaxConnsPerAddr int
	// MaxConcurrentUploads bounds PUTs of entries in progress at once; one
	// more gets 503 with Retry-After. Default 64; negative means no bound.
	MaxConcurrentUploads int
	// RequestsPerSecond is each identity's sustained request rate (a token
	// name, or the client address (clientGroup), for anonymous
	// requests and when the server runs without authentication); past it,
	// 429 with Retry-After.
	// 0 means no rate limit.
	RequestsPerSecond float64
	// Burst is how many requests an identity may make at once above the
	// rate. Default max(1, 2×RequestsPerSecond).
	Burst int
	// IPv6ClientPrefix is the prefix length, 1 to 128, by which IPv6
	// client addresses are grouped into one client for MaxConnsPerAddr,
	// the anonymous rate and upload share and distinct anonymous
	// reporters. Default 128: each address is its own client.
	IPv6ClientPrefix int
}

// withDefaults fills in the zero fields.
func (l Limits) withDefaults() Limits {
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 30 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 30 * time.Second
	}
	if l.MinTransferRate == 0 {
		l.MinTransferRate = 64 << 10
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 16 << 10
	}
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxConns()
	}
	if l.MaxConnsPerAddr == 0 {
		l.MaxConnsPerAddr = -1
		if l.MaxConns > 0 {
			l.MaxConnsPerAddr = max(1, l.MaxConns/2)
		}
	}
	if l.MaxConcurrentUploads == 0 {
		l.MaxConcurrentUploads = 64
	}
	if l.IPv6ClientPrefix == 0 {
		l.IPv6ClientPrefix = 128
	}
	if l.Burst <= 0 {
		l.Burst = max(1, int(math.Ceil(2*l.RequestsPerSecond)))
	}
	return l
}

// maxRateKeys bounds each table of rate buckets (limit.Rates).
const maxRateKeys = 10000

// security is the server's limiters and the metrics of what auth and
// limits refuse.
type security struct {
	// rates holds the tokens' buckets and addrRates the client
	// addresses'. Each is bounded and, full of buckets in use, refuses a
	// new identity: apart, addresses (any number of them, from one client
	// with many) cannot fill the tokens' table and refuse every token
	// not yet seen.
	rates     *limit.Rates
	addrRates *limit.Rates
	uploads   *limit.Gate
	// uploadsMu guards uploadsBy, the upload places each identity holds
	// (uploadShare).
	uploadsMu    sync.Mutex
	uploadsBy    map[string]int
	maxUploads   int
	authFailures *prometheus.CounterVec
	rejected     *prometheus.CounterVec
}

// newSecurity builds the limiters and registers their metrics. No metric
// carries a token or a token name.
func newSecurity(cfg *Config) (*security, error) {
	sec := &security{
		rates:      limit.NewRates(cfg.Limits.RequestsPerSecond, cfg.Limits.Burst, maxRateKeys),
		addrRates:  limit.NewRates(cfg.Limits.RequestsPerSecond, cfg.Limits.Burst, maxRateKeys),
		uploads:    limit.NewGate(cfg.Limits.MaxConcurrentUploads),
		uploadsBy:  map[string]int{},
		maxUploads: cfg.Limits.MaxConcurrentUploads,
		authFailures: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_auth_failures_total",
			Help: "Requests refused by authentication (unauthenticated: 401) or authorization (forbidden: 403).",
		}, []string{"reason"}), "unauthenticated", "forbidden"),
		rejected: withSeries(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_limited_total",
			Help: "Requests refused by a limit: rate (429), uploads (503, too many concurrent uploads), connections (503, a connection past --max-conns), connections_per_addr (503, past --max-conns-per-addr from one client address) or signature_memory (503, keys and lookup requests whose signatures would pass the memory kept for them).",
		}, []string{"limit"}), "rate", "uploads", "connections", "connections_per_addr", "signature_memory"),
	}
	uploads := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_uploads_in_progress",
		Help: "Entry uploads in progress (bounded by --max-concurrent-uploads).",
	}, func() float64 { return float64(sec.uploads.InUse()) })
	for _, c := range []prometheus.Collector{sec.authFailures, sec.rejected, uploads} {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("register security metrics: %w", err)
		}
	}
	return sec, nil
}

// limit returns the middleware that applies the per-identity rate (429)
// to a route under /v1 and, on an upload route, the concurrent-upload bound
// (503). Both answer before any of the body is read and carry Retry-After.
func (s *Server) limit(r Route) fiber.Handler {
	rated := strings.HasPrefix(r.Path, "/v1/")
	return func(c *fiber.Ctx) error {
		if !rated {
			return c.Next()
		}
		if s.sec.rates.Limited() { // without a limit, no key to build per request
			if err := s.rateLimit(c, s.limitIdentity(c)); err != nil {
				return err
			}
		}
		if r.Upload {
			who := s.limitIdentity(c)
			held, ok := s.sec.enterUpload(who)
			if !ok {
				s.sec.rejected.WithLabelValues("uploads").Inc()
				c.Set(fiber.HeaderRetryAfter, "1")
				if held > 0 {
					return Errorf(http.StatusServiceUnavailable, "too_many_uploads",
						"%s holds %d of this server's %d upload places; the last quarter is kept for other writers: retry in a second, once one of its uploads ends.",
						strings.TrimPrefix(strings.TrimPrefix(who, "token:"), "addr:"), held, s.cfg.Limits.MaxConcurrentUploads)
				}
				return Errorf(http.StatusServiceUnavailable, "too_many_uploads",
					"The server is receiving %d uploads, its limit; retry in a second.", s.cfg.Limits.MaxConcurrentUploads)
			}
			defer s.sec.leaveUpload(who)
		}
		return c.Next()
	}
}

// limitIdentity is whom the rate and upload limits count a request against:
// its token's name, or its client address (clientGroup) when it has no
// token.
func (s *Server) limitIdentity(c *fiber.Ctx) string {
	if id, ok := requestIdentity(c); ok && !id.Anonymous {
		return "token:" + id.Name
	}
	return "addr:" + requestClientGroup(c, s.cfg.Limits.IPv6ClientPrefix)
}

// enterUpload takes an upload place for who, or reports how many who holds
// and false. An identity holding half the places or more may not take one
// of the last quarter: one token's slow uploads (a 4 GiB entry at
// --min-transfer-rate takes 18 hours) would otherwise hold every place
// and refuse every other writer. held is 0 when the gate is simply full.
func (sec *security) enterUpload(who string) (held int, ok bool) {
	sec.uploadsMu.Lock()
	defer sec.uploadsMu.Unlock()
	if n := sec.maxUploads; n > 0 {
		held = sec.uploadsBy[who]
		if free := n - sec.uploads.InUse(); 2*held >= n && free-1 < n/4 {
			return held, false
		}
	}
	if !sec.uploads.TryEnter() {
		return 0, false
	}
	sec.uploadsBy[who]++
	return 0, true
}

// leaveUpload gives back an upload place who took.
func (sec *security) leaveUpload(who string) {
	sec.uploadsMu.Lock()
	defer sec.uploadsMu.Unlock()
	sec.uploads.Leave()
	if sec.uploadsBy[who]--; sec.uploadsBy[who] <= 0 {
		delete(sec.uploadsBy, who)
	}
}

// rateLimit takes a request from who's bucket (limitIdentity), or returns
// the 429.
func (s *Server) rateLimit(c *fiber.Ctx, who string) error {
	rates, counted := s.sec.addrRates, " Requests without a valid token count against their client address"+ipv6Grouping(s.cfg.Limits.IPv6ClientPrefix)+"."
	if strings.HasPrefix(who, "token:") {
		rates, counted = s.sec.rates, ""
	}
	ok, wait := rates.Allow(who)
	if ok {
		return nil
	}
	s.sec.rejected.WithLabelValues("rate").Inc()
	c.Set(fiber.HeaderRetryAfter, retryAfter(wait))
	return Errorf(http.StatusTooManyRequests, "rate_limited",
		"Too many requests: the limit is %g per second with bursts of %d; retry after %s seconds.%s",
		s.cfg.Limits.RequestsPerSecond, s.cfg.Limits.Burst, retryAfter(wait), counted)
}

// retryAfter renders a wait as whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// secureListener wraps ln with the minimum-transfer-rate deadlines and, when
// configured, TLS.
func (s *Server) secureListener(ln net.Listener) net.Listener {
	l := s.cfg.Limits
	if l.MinTransferRate > 0 {
		ln = limit.PaceListener(ln, l.ReadTimeout, l.MinTransferRate)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	return ln
}
