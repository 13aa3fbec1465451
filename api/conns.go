package api

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

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

	// lastLog is when a failed accept was last logged, and failed how many
	// have failed since: a flood logs one line a minute, not one per try.
	lastLog time.Time
	failed  int
}

// Accept accepts a connection and tracks it until it is closed. An accept
// that fails for want of a resource (the open-files limit reached, kernel
// memory) is retried after a backoff of 5 ms doubling to 1 s, as net/http
// does: fasthttp would return the error, and serve would exit, so that a
// client opening connections up to the process's file limit took the
// server down for everyone.
func (l *trackingListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !retryableAccept(err) || l.s.closing.Load() {
				return nil, err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.logFailure(err)
			time.Sleep(delay)
			continue
		}
		delay = 0
		tc := &trackedConn{Conn: c, s: l.s}
		if r, id := l.s.admitConn(tc); r != nil {
			l.s.refuseConn(c, r, id)
			continue
		}
		return tc, nil
	}
}

// retryableAccept reports whether an accept failed for want of a resource
// that frees up as connections close, rather than because the listener is
// closed or broken.
func retryableAccept(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// logFailure logs a retried accept failure, at most once a minute.
func (l *trackingListener) logFailure(err error) {
	l.failed++
	if time.Since(l.lastLog) < time.Minute {
		return
	}
	msg := "accepting a connection failed; retrying"
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		msg = "accepting a connection failed: the open-files limit is reached; connections are refused until some close (raise the limit, e.g. LimitNOFILE= or ulimit -n); retrying"
	}
	l.s.log.Error(msg, "err", err, "failures_since_last_log", l.failed)
	l.lastLog, l.failed = time.Now(), 0
}

// trackedConn removes itself from the server's set when closed, remembers
// whether the peer closed its side (see bodyReader), and fails every read and
// write once a forced shutdown aborts it.
type trackedConn struct {
	net.Conn
	s *Server
	// addr is the client address the connection counts against
	// (MaxConnsPerAddr); "" when it counts against none.
	addr    string
	once    sync.Once
	sawEOF  atomic.Bool
	aborted atomic.Bool
	// linger makes Close a lingering close (see lingerOnClose).
	linger atomic.Bool
}

// lingerTime and lingerBytes bound a lingering close: how long, and how
// much of what the client still sends, the server reads and discards.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 64 << 20
)

// lingerOnClose makes the closing of conn, which answered a request whose
// body it did not read to the end, a lingering close: half-close, then
// read and discard what the client still sends for up to lingerTime (and
// lingerBytes). Closing at once, with the body's bytes still arriving,
// makes the kernel reset the connection, and a reset can destroy the
// answer before the client reads it: a client still sending a large
// upload or import would see "connection reset" instead of the 413 or 507
// that says why.
func lingerOnClose(conn net.Conn) {
	if tc, ok := conn.(*trackedConn); ok {
		tc.linger.Store(true)
	}
}

// errAborted is what reads and writes return on a connection aborted by a
// forced shutdown.
var errAborted = errors.New("connection aborted: the server is shutting down and its --shutdown-grace ran out")

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
	if c.aborted.Load() && (err == nil || !errors.Is(err, io.EOF)) {
		// The read that abortConns cut short by its past deadline: say
		// so, or the body reader takes it for a client too slow for
		// --min-transfer-rate (a 408 "send the body faster", logged and
		// counted as the client's fault).
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

// Close closes the connection and forgets it, lingering first when
// lingerOnClose asked for it (a forced shutdown's abort ends that at once).
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		if c.linger.Load() {
			if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			if c.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
				_, _ = io.CopyN(io.Discard, c, lingerBytes)
			}
		}
		c.s.forgetConn(c)
	})
	return c.Conn.Close()
}
