package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/proxyaddr"
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
	s.perAddr = make(map[string]int)
	s.refusals = [2]connRefusal{
		{"connections", fmt.Sprintf("The server has %d connections open, its limit (--max-conns); retry in a second. "+
			"A client should reuse a few keep-alive connections rather than open many.", s.cfg.Limits.MaxConns)},
		{"connections_per_addr", fmt.Sprintf("Your address%s has %d connections open to this server, its limit per client address (--max-conns-per-addr); "+
			"retry once one of them closes. A client should reuse a few keep-alive connections rather than open many.",
			ipv6Grouping(s.cfg.Limits.IPv6ClientPrefix), s.cfg.Limits.MaxConnsPerAddr)},
	}
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

// connRefusal is the label in cachesvc_limited_total of a connection past
// a limit, and the message of its answer.
type connRefusal struct {
	limit   string
	message string
}

// admitConn starts tracking c, or returns the refusal of the limit it is
// past: MaxConns, or MaxConnsPerAddr for its client address.
func (s *Server) admitConn(c *trackedConn) (r *connRefusal, requestID string) {
	addr, counted := perAddrKey(c.RemoteAddr(), s.cfg.TrustedProxies, s.cfg.Limits.IPv6ClientPrefix)
	r, refused, logIt := s.admitConnLocked(c, addr, counted)
	if r == nil {
		return nil, ""
	}
	// The request is never read, so its own X-Request-Id is unknown: the
	// answer carries a new one.
	requestID = s.ids.next()
	if logIt {
		// Logged outside mu, which every accept and close takes.
		s.logRefusal(r, c.RemoteAddr(), addr, refused, requestID)
	}
	return r, requestID
}

// admitConnLocked is admitConn's work under mu; logIt asks for the
// refusal to be logged, with refused since the last line of its limit.
func (s *Server) admitConnLocked(c *trackedConn, addr string, counted bool) (r *connRefusal, refused int, logIt bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := s.cfg.Limits.MaxConns; max >= 0 && len(s.conns) >= max {
		refused, logIt = s.refusalLogDue(0)
		return &s.refusals[0], refused, logIt
	}
	if max := s.cfg.Limits.MaxConnsPerAddr; counted && max >= 0 {
		if s.perAddr[addr] >= max {
			refused, logIt = s.refusalLogDue(1)
			return &s.refusals[1], refused, logIt
		}
		s.perAddr[addr]++
		c.addr = addr
	}
	s.conns[c] = struct{}{}
	return nil, 0, false
}

// forgetConn stops tracking c, freeing its places.
func (s *Server) forgetConn(c *trackedConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if c.addr != "" {
		if s.perAddr[c.addr]--; s.perAddr[c.addr] <= 0 {
			delete(s.perAddr, c.addr)
		}
	}
}

// perAddrKey returns the client a connection from a counts against for
// MaxConnsPerAddr: clientGroup of its IP with ipv6Bits. counted
// is false for loopback (a proxy or sidecar on this host), for a reverse
// proxy in trusted (all its clients' connections come from it, and their
// forwarded addresses are not known at accept), and for an address that
// is not TCP's.
func perAddrKey(a net.Addr, trusted *proxyaddr.Trusted, ipv6Bits int) (key string, counted bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "", false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok || ip.Unmap().IsLoopback() || trusted.Contains(ip) {
		return "", false
	}
	return clientGroup(ip, ipv6Bits), true
}

// refusalLogDue counts a refusal at the limit s.refusals[i] and reports
// whether it is to be logged, with how many were refused there since the
// last line: at most one line a minute per limit, as a host opening
// connections in a loop would flood the log. s.mu is held.
func (s *Server) refusalLogDue(i int) (refused int, ok bool) {
	s.refusedSinceLog[i]++
	if time.Since(s.refusalLogged[i]) < time.Minute {
		return 0, false
	}
	refused = s.refusedSinceLog[i]
	s.refusalLogged[i], s.refusedSinceLog[i] = time.Now(), 0
	return refused, true
}

// logRefusal logs a connection from remote refused at r's limit, with the
// id its answer carries (the refusals the line stands for carried others)
// and what an operator can do; group is what remote counts as per address
// (an IPv6 address's prefix under --ipv6-client-prefix), "" when not
// counted.
func (s *Server) logRefusal(r *connRefusal, remote net.Addr, group string, refused int, requestID string) {
	client := remote.String()
	if ta, ok := remote.(*net.TCPAddr); ok {
		client = ta.IP.String()
	}
	if r == &s.refusals[0] {
		s.log.Warn("connection refused: the server has --max-conns connections open; "+
			"raise --max-conns (and the open-files limit), or find the clients that hold many idle connections",
			"client", client, "max_conns", s.cfg.Limits.MaxConns, "refused_since_last_log", refused, "request_id", requestID)
		return
	}
	s.log.Warn("connection refused: its client address (counted_as: the address, or an IPv6 one's prefix under --ipv6-client-prefix) has --max-conns-per-addr connections open; "+
		"behind a reverse proxy on another host, which every request comes through, raise the limit or set it to -1; "+
		"if counted_as is a prefix that many hosts share, raise --ipv6-client-prefix",
		"client", client, "counted_as", group, "max_conns_per_addr", s.cfg.Limits.MaxConnsPerAddr, "refused_since_last_log", refused, "request_id", requestID)
}

// refuseConn answers c, a connection past MaxConns, with 503
// too_many_connections, Retry-After and X-Request-Id requestID, then
// closes it. The answer is written before the request is read (there is
// nobody to serve it), so the close lingers briefly, reading what the
// client sends, lest a reset destroy the answer. With maxRefusing
// refusals under way, c is closed at once.
func (s *Server) refuseConn(c net.Conn, r *connRefusal, requestID string) {
	s.sec.rejected.WithLabelValues(r.limit).Inc()
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
		if _, err := c.Write(refusalAnswer(r.message, requestID)); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.CopyN(io.Discard, c, 64<<10)
	}()
}

// refusalAnswer renders the whole HTTP response, 503 too_many_connections
// with message and requestID, that a connection past a limit gets.
func refusalAnswer(message, requestID string) []byte {
	body, _ := json.Marshal(wire.ErrorBody{Error: wire.ErrorObject{Code: "too_many_connections", Message: message, RequestID: requestID}})
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Retry-After: 1\r\nConnection: close\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s", wire.HeaderRequestID, requestID, len(body), body)
}
