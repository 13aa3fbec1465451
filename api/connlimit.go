package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/wire"
)

// Bounds of the default MaxConns, and the descriptors it leaves to the
// rest of the process: Badger's tables and value logs, the plugins'
// compiled-code cache, the Redis listener (--redis-max-conns, 256) and the
// shared tier's connections. Past the open-files limit an accept fails and
// so do the store's own opens (a plugin compile, a table flush).
const (
	fdReserve       = 1024
	minDefaultConns = 64
	maxDefaultConns = 65536
)

// refusing bounds the connections being answered 503 at once: each holds
// its descriptor for up to refuseTime, and a flood past it is closed with
// no answer rather than letting the refusals use up the descriptors.
const (
	maxRefusing = 64
	refuseTime  = time.Second
)

// DefaultMaxConns is the open-files limit (RLIMIT_NOFILE, as Go's runtime
// raised it at start) less the descriptors kept for the store and the
// other listeners, between 64 and 65,536.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<31 {
		return maxDefaultConns
	}
	return min(max(int(rl.Cur)-fdReserve, minDefaultConns), maxDefaultConns)
}

// initConnLimit prepares the refusals and registers the gauge of open
// connections.
func (s *Server) initConnLimit() error {
	s.refusing = make(chan struct{}, maxRefusing)
	s.refusal = connRefusal(s.cfg.Limits.MaxConns)
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_http_connections",
		Help: "HTTP connections open, idle keep-alive ones included (bounded by --max-conns).",
	}, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.conns))
	})
	if err := s.cfg.Registry.Register(open); err != nil {
		return fmt.Errorf("register connection metrics: %w", err)
	}
	return nil
}

// overConnLimit reports whether the server already has MaxConns
// connections open, so that one more must be refused.
func (s *Server) overConnLimit() bool {
	max := s.cfg.Limits.MaxConns
	if max < 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) >= max
}

// refuseConn answers c, a connection past MaxConns, with 503
// too_many_connections and Retry-After, then closes it. The answer is
// written before the request is read (there is nobody to serve it), so
// the close lingers briefly, reading what the client sends, lest a reset
// destroy the answer. With maxRefusing refusals under way, c is closed at
// once.
func (s *Server) refuseConn(c net.Conn) {
	s.sec.rejected.WithLabelValues("connections").Inc()
	select {
	case s.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-s.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseTime))
		if _, err := c.Write(s.refusal); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.CopyN(io.Discard, c, 64<<10)
	}()
}

// connRefusal renders the whole HTTP response a connection past the limit
// gets.
func connRefusal(max int) []byte {
	body, _ := json.Marshal(wire.ErrorBody{Error: wire.ErrorObject{Code: "too_many_connections",
		Message: fmt.Sprintf("The server has %d connections open, its limit (--max-conns); retry in a second. "+
			"A client should reuse a few keep-alive connections rather than open many.", max)}})
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}
