package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// ErrStalled means the server sent and accepted nothing for
// Config.StallTimeout: it is hung, or the network between is.
var ErrStalled = errors.New("the server stalled")

// stallDialer returns a DialContext whose connections fail a Read or Write
// once no byte has moved in either direction for d.
func stallDialer(d time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: d, KeepAlive: 15 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.SetDeadline(time.Now().Add(d)); err != nil {
			c.Close()
			return nil, err
		}
		return &stallConn{Conn: c, d: d}, nil
	}
}

// stallConn moves both deadlines forward on every byte it reads or writes,
// so a pending Read (the transport waits for the answer while it uploads)
// lives as long as the upload progresses, and the other way round.
type stallConn struct {
	net.Conn
	d time.Duration
}

// Read reads and, on progress, extends the connection's deadlines.
func (c *stallConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.after(n, err)
}

// Write writes and, on progress, extends the connection's deadlines.
func (c *stallConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.after(n, err)
}

func (c *stallConn) after(n int, err error) error {
	if n > 0 {
		_ = c.Conn.SetDeadline(time.Now().Add(c.d))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: nothing moved on the connection to %s for %s (is it overloaded or hung?): %w", ErrStalled, c.RemoteAddr(), c.d, err)
	}
	return err
}
