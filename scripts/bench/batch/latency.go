package main

import (
	"io"
	"net"
	"sync"
	"time"
)

// latencyProxy listens on loopback and forwards each connection to target,
// delivering every piece of data delay after it was read, in each direction
// (so a round trip costs 2*delay). Bandwidth is not limited: it models the
// propagation delay between hosts, which loopback lacks.
type latencyProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
}

// startLatencyProxy starts a proxy to target with a round-trip time of rtt.
func startLatencyProxy(target string, rtt time.Duration) (*latencyProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &latencyProxy{ln: ln, target: target, delay: rtt / 2}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address.
func (p *latencyProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting connections.
func (p *latencyProxy) Close() { p.ln.Close(); p.wg.Wait() }

func (p *latencyProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

type piece struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, holding each piece for the one-way delay.
func (p *latencyProxy) pipe(src, dst net.Conn) {
	q := make(chan piece, 4096)
	go func() {
		for pc := range q {
			if d := time.Until(pc.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(pc.data); err != nil {
				break
			}
		}
		dst.Close()
		for range q {
		}
	}()
	for {
		buf := make([]byte, 64<<10)
		n, err := src.Read(buf)
		if n > 0 {
			q <- piece{buf[:n], time.Now().Add(p.delay)}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			close(q)
			return
		}
	}
}
