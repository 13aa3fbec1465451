package api

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// sigMemory bounds the bytes that keys and lookup requests hold in memory
// for their signatures, all requests together. A signature is read whole
// (its plugin needs it whole), up to --max-signature-size each, and a
// gzip body decompresses about a thousandfold: without this bound, 24
// anonymous 70 KB requests at once took the server from 1.6 to 2.9 GB.
type sigMemory struct {
	max  int64
	used atomic.Int64
	// refused counts requests refused for want of room
	// (cachesvc_limited_total{limit="signature_memory"}).
	refused prometheus.Counter
}

// take charges n bytes, or reports false when they do not fit.
func (m *sigMemory) take(n int64) bool {
	for {
		u := m.used.Load()
		if u+n > m.max {
			return false
		}
		if m.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give returns n bytes charged by take.
func (m *sigMemory) give(n int64) { m.used.Add(-n) }

// full is the 503 of a request refused for want of room: retried in a
// second, by when the requests holding it have been keyed.
func (m *sigMemory) full(c *fiber.Ctx) error {
	m.refused.Inc()
	c.Set(fiber.HeaderRetryAfter, "1")
	return Errorf(http.StatusServiceUnavailable, "too_many_signatures",
		"The signatures being keyed hold the %d bytes this server keeps for them (4 times --max-signature-size); retry in a second.", m.max)
}

// read reads r to its end into a buffer charged to m: it starts at hint
// bytes and doubles as it fills, each growth charged before it is made.
// charged is what the caller gives back once done with the bytes, also
// after an error; ok is false when m had no room (nothing more is read).
func (m *sigMemory) read(r io.Reader, hint int) (b []byte, charged int64, ok bool, err error) {
	hint = max(hint, 512)
	if !m.take(int64(hint)) {
		return nil, 0, false, nil
	}
	charged = int64(hint)
	b = make([]byte, 0, hint)
	var probe [512]byte
	for {
		if len(b) < cap(b) {
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				return b, charged, true, nil
			}
			if err != nil {
				return b, charged, true, err
			}
			continue
		}
		// Full: a body of exactly the expected length ends here, so look
		// before doubling.
		n, err := r.Read(probe[:])
		if n == 0 && err == io.EOF {
			return b, charged, true, nil
		}
		if n == 0 && err != nil {
			return b, charged, true, err
		}
		if n == 0 {
			continue
		}
		grow := max(cap(b), n)
		if !m.take(int64(grow)) {
			return nil, charged, false, nil
		}
		charged += int64(grow)
		nb := make([]byte, len(b), cap(b)+grow)
		copy(nb, b)
		b = append(nb, probe[:n]...)
		if err == io.EOF {
			return b, charged, true, nil
		}
		if err != nil {
			return b, charged, true, err
		}
	}
}

// newSigMemory bounds signature memory at 4 times maxSignature, room for
// one signature at the limit even where its buffer doubled past it, and
// registers its gauge.
func newSigMemory(maxSignature int64, refused prometheus.Counter, reg prometheus.Registerer) (*sigMemory, error) {
	m := &sigMemory{max: 4 * maxSignature, refused: refused}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_signature_memory_bytes",
		Help: "Bytes that keys and lookup requests hold for their signatures (at most 4 times --max-signature-size; past it they get 503 too_many_signatures).",
	}, func() float64 { return float64(m.used.Load()) })
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register signature memory gauge: %w", err)
	}
	return m, nil
}
