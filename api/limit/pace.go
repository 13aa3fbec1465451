// Package limit holds the server's protective limits that know nothing of
// HTTP routes: a connection wrapper that turns fixed read/write timeouts into
// a minimum transfer rate, per-identity token buckets, and a concurrency
// gate. None of them buffers a body.
package limit

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// PaceListener wraps ln so that every accepted connection enforces a minimum
// transfer rate; see PaceConn.
func PaceListener(ln net.Listener, handshake time.Duration, minRate int64) net.Listener {
	return &paceListener{Listener: ln, handshake: handshake, minRate: minRate}
}

type paceListener struct {
	net.Listener
	handshake time.Duration
	minRate   int64
}

// Accept accepts a connection and wraps it in a PaceConn whose first read
// phase (the TLS handshake or the first request's headers) has the
// handshake timeout.
func (l *paceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewPaceConn(c, l.handshake, l.minRate), nil
}

// PaceConn stretches the deadlines the HTTP server sets with the number of
// bytes moved. When the server sets a read (or write) deadline d from now,
// it starts a phase: the deadline for each later read (write) becomes
//
//	phase start + d + bytes moved in the phase / minRate
//
// So a body of any size may take the server's timeout plus its size at
// minRate bytes per second, and a client that falls below minRate for
// longer than the timeout allows is cut off: a slow-loris cannot hold a
// connection for ever, yet a large upload or download at a reasonable rate
// is never cut. A zero deadline clears the phase. minRate <= 0 leaves the
// server's deadlines as they are.
//
// The deadline set on the underlying connection is only ever moved
// earlier, never later, and a read or write it stops before the phase's
// deadline has passed is resumed with the deadline moved to it. Setting a
// deadline is a timer update in the runtime, and the HTTP server starts two
// phases per request besides the reads and writes that extend them; this
// way a keep-alive connection moving small requests pays for a timer update
// about once per timeout instead of several times per request, and no
// deadline ever fires late.
//
// Deadlines may be set from any goroutine, as for net.Conn.
type PaceConn struct {
	net.Conn
	minRate float64

	mu     sync.Mutex
	rPhase phase
	wPhase phase
}

type phase struct {
	active bool
	start  time.Time
	base   time.Duration
	bytes  int64
	// armed is the deadline set on the connection (zero: none); it is
	// never later than the phase's deadline while the phase is active.
	armed time.Time
}

// deadline is the phase's deadline with extra more bytes moved.
func (p *phase) deadline(rate float64, extra int) time.Time {
	if rate <= 0 {
		return p.start.Add(p.base)
	}
	return p.start.Add(p.base + time.Duration(float64(p.bytes+int64(extra))/rate*float64(time.Second)))
}

// NewPaceConn wraps c; the first read phase starts now with timeout first
// (0 for none).
func NewPaceConn(c net.Conn, first time.Duration, minRate int64) *PaceConn {
	pc := &PaceConn{Conn: c, minRate: float64(minRate)}
	if first > 0 {
		_ = pc.SetReadDeadline(time.Now().Add(first))
	}
	return pc
}

// Read reads and moves the read deadline forward by the bytes read.
func (c *PaceConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		c.mu.Lock()
		if n > 0 && c.rPhase.active {
			c.rPhase.bytes += int64(n)
		}
		resume := err != nil && n == 0 && c.resumable(err, &c.rPhase, 0, c.Conn.SetReadDeadline)
		c.mu.Unlock()
		if !resume {
			return n, err
		}
	}
}

// Write gives the write the time its size allows at the minimum rate, then
// writes.
func (c *PaceConn) Write(p []byte) (int, error) {
	written := 0
	for {
		n, err := c.Conn.Write(p[written:])
		written += n
		c.mu.Lock()
		if n > 0 && c.wPhase.active {
			c.wPhase.bytes += int64(n)
		}
		resume := err != nil && written < len(p) && c.resumable(err, &c.wPhase, len(p)-written, c.Conn.SetWriteDeadline)
		c.mu.Unlock()
		if !resume {
			return written, err
		}
	}
}

// resumable reports whether err is the connection's deadline stopping an
// operation before the phase's own deadline (with extra bytes still to
// move); if so it moves the connection's deadline to the phase's, so that
// the operation can go on. The caller holds c.mu.
func (c *PaceConn) resumable(err error, p *phase, extra int, set func(time.Time) error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) || p.armed.IsZero() {
		return false
	}
	var d time.Time // no deadline: the phase was cleared
	if p.active {
		d = p.deadline(c.minRate, extra)
		if !time.Now().Before(d) {
			return false
		}
	}
	if set(d) != nil {
		return false
	}
	p.armed = d
	return true
}

// SetDeadline starts read and write phases ending at t.
func (c *PaceConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline starts a read phase whose base timeout is t - now; a zero
// t clears it.
func (c *PaceConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rPhase.begin(t, c.Conn.SetReadDeadline)
}

// SetWriteDeadline starts a write phase whose base timeout is t - now; a
// zero t clears it.
func (c *PaceConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wPhase.begin(t, c.Conn.SetWriteDeadline)
}

// NetConn returns the wrapped connection.
func (c *PaceConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the wrapped connection (a TCP one sends its FIN),
// or returns errors.ErrUnsupported when it cannot. The embedded net.Conn
// does not carry the method, so without this a lingering close (the HTTP
// server's after an answer to a body it did not read) sent no FIN, and a
// client reading to the end of a Connection: close answer waited out the
// linger.
func (c *PaceConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// begin starts a phase ending at t (none for a zero t). The connection's
// deadline is set only when it would fire after t or there is none; one
// that fires earlier is resumed from (see PaceConn), and a cleared phase
// keeps the deadline set until it fires.
func (p *phase) begin(t time.Time, set func(time.Time) error) error {
	armed := p.armed
	if t.IsZero() {
		*p = phase{armed: armed}
		return nil
	}
	now := time.Now()
	*p = phase{active: true, start: now, base: t.Sub(now), armed: armed}
	if !armed.IsZero() && !armed.After(t) {
		return nil
	}
	if err := set(t); err != nil {
		return err
	}
	p.armed = t
	return nil
}
