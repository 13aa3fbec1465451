package stats

import (
	"math"

	"github.com/cachesvc/cachesvc/wire"
)

// Counters are the additive totals kept per namespace × backend × time
// bucket, per run and overall. Compile seconds saved are kept in whole
// microseconds so that sums are exact; sums saturate at math.MaxInt64
// instead of wrapping negative.
type Counters struct {
	Lookups     int64 `json:"lookups"`
	Hits        int64 `json:"hits"`
	Misses      int64 `json:"misses"`
	BytesIn     int64 `json:"bytes_in"`
	BytesOut    int64 `json:"bytes_out"`
	Writes      int64 `json:"writes"`
	Evictions   int64 `json:"evictions"`
	SavedMicros int64 `json:"saved_us"`
	// WaitHits are the hits of GET ?wait=, which a client sends after
	// missing while another client compiles: Misses-WaitHits is how many
	// compiles clients ran.
	WaitHits int64 `json:"wait_hits,omitempty"`
	// EvictedBy splits Evictions by reason; evictions counted before the
	// reason was recorded are in Evictions only.
	EvictedBy wire.EvictionReasons `json:"evicted_by,omitzero"`
}

// add adds o to c, saturating: one absurd entry must not wrap a total
// negative (issue 12, bug 2), and a counter stuck at the top is visibly
// wrong without wrecking the others.
func (c *Counters) add(o *Counters) {
	c.Lookups = satAdd(c.Lookups, o.Lookups)
	c.Hits = satAdd(c.Hits, o.Hits)
	c.Misses = satAdd(c.Misses, o.Misses)
	c.BytesIn = satAdd(c.BytesIn, o.BytesIn)
	c.BytesOut = satAdd(c.BytesOut, o.BytesOut)
	c.Writes = satAdd(c.Writes, o.Writes)
	c.Evictions = satAdd(c.Evictions, o.Evictions)
	c.SavedMicros = satAdd(c.SavedMicros, o.SavedMicros)
	c.WaitHits = satAdd(c.WaitHits, o.WaitHits)
	addReasons(&c.EvictedBy, o.EvictedBy)
}

// addReasons adds o to e, saturating.
func addReasons(e *wire.EvictionReasons, o wire.EvictionReasons) {
	e.Size = satAdd(e.Size, o.Size)
	e.Quota = satAdd(e.Quota, o.Quota)
	e.Idle = satAdd(e.Idle, o.Idle)
	e.Age = satAdd(e.Age, o.Age)
}

// clampNegative sets every negative counter to 0 and reports whether it
// found one. No counter can go negative by counting; one read from disk
// can, written before sums saturated.
func (c *Counters) clampNegative() bool {
	bad := false
	e := &c.EvictedBy
	for _, p := range []*int64{&c.Lookups, &c.Hits, &c.Misses, &c.BytesIn, &c.BytesOut, &c.Writes, &c.Evictions, &c.SavedMicros, &c.WaitHits,
		&e.Size, &e.Quota, &e.Idle, &e.Age} {
		if *p < 0 {
			*p, bad = 0, true
		}
	}
	return bad
}

// satAdd returns a+b, or the int64 bound it would cross.
func satAdd(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// Totals is the wire type of the same name (wire).
type Totals = wire.Totals

// Totals converts c for reporting.
func (c Counters) Totals() Totals {
	t := Totals{
		Lookups: c.Lookups, Hits: c.Hits, Misses: c.Misses, WaitHits: c.WaitHits,
		BytesIn: c.BytesIn, BytesOut: c.BytesOut, Writes: c.Writes, Evictions: c.Evictions,
		CompileSecondsSaved: float64(c.SavedMicros) / 1e6,
		EvictionsByReason:   c.EvictedBy,
	}
	if c.Lookups > 0 {
		t.HitRate = float64(c.Hits) / float64(c.Lookups)
	}
	return t
}

// micros converts seconds, clamped to [0, wire.MaxCompileSeconds] (NaN is
// 0), to whole microseconds, rounding to nearest. Unclamped, 1e308 seconds
// converted to math.MinInt64.
func micros(sec float64) int64 {
	return int64(wire.ClampCompileSeconds(sec)*1e6 + 0.5)
}
