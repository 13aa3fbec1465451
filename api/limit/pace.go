// Package limit holds the server's protective limits that know nothing of
// HTTP routes: a connection wrapper that turns fixed read/write timeouts into
// a minimum transfer rate, per-identity token buckets, and a concurrency
// gate. None of them buffers a body.
package limit

import (
	"net"
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
}

func (p *phase) deadline(rate float64, extra int) time.Time {
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
	n, err := c.Conn.Read(p)
	if n > 0 && c.minRate > 0 {
		c.mu.Lock()
		if c.rPhase.active {
			c.rPhase.bytes += int64(n)
			_ = c.Conn.SetReadDeadline(c.rPhase.deadline(c.minRate, 0))
		}
		c.mu.Unlock()
	}
	return n, err
}

// Write gives the write the time its size allows at the minimum rate, then
// writes.
func (c *PaceConn) Write(p []byte) (int, error) {
	if c.minRate > 0 {
		c.mu.Lock()
		if c.wPhase.active {
			_ = c.Conn.SetWriteDeadline(c.wPhase.deadline(c.minRate, len(p)))
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Write(p)
	if n > 0 && c.minRate > 0 {
		c.mu.Lock()
		c.wPhase.bytes += int64(n)
		c.mu.Unlock()
	}
	return n, err
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
	c.rPhase = newPhase(t)
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline starts a write phase whose base timeout is t - now; a
// zero t clears it.
func (c *PaceConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wPhase = newPhase(t)
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// NetConn returns the wrapped connection.
func (c *PaceConn) NetConn() net.Conn { return c.Conn }

func newPhase(t time.Time) phase {
	if t.IsZero() {
		return phase{}
	}
	now := time.Now()
	return phase{active: true, start: now, base: t.Sub(now)}
}
