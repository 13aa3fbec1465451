package stats

import "github.com/cachesvc/cachesvc/wire"

// Counters are the additive totals kept per namespace × backend × time
// bucket, per run and overall. Compile seconds saved are kept in whole
// microseconds so that sums are exact.
type Counters struct {
	Lookups     int64 `json:"lookups"`
	Hits        int64 `json:"hits"`
	Misses      int64 `json:"misses"`
	BytesIn     int64 `json:"bytes_in"`
	BytesOut    int64 `json:"bytes_out"`
	Writes      int64 `json:"writes"`
	Evictions   int64 `json:"evictions"`
	SavedMicros int64 `json:"saved_us"`
}

// add adds o to c.
func (c *Counters) add(o *Counters) {
	c.Lookups += o.Lookups
	c.Hits += o.Hits
	c.Misses += o.Misses
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	c.Writes += o.Writes
	c.Evictions += o.Evictions
	c.SavedMicros += o.SavedMicros
}

// Totals is the wire type of the same name (wire).
type Totals = wire.Totals

// Totals converts c for reporting.
func (c Counters) Totals() Totals {
	t := Totals{
		Lookups: c.Lookups, Hits: c.Hits, Misses: c.Misses,
		BytesIn: c.BytesIn, BytesOut: c.BytesOut, Writes: c.Writes, Evictions: c.Evictions,
		CompileSecondsSaved: float64(c.SavedMicros) / 1e6,
	}
	if c.Lookups > 0 {
		t.HitRate = float64(c.Hits) / float64(c.Lookups)
	}
	return t
}

// micros converts seconds to whole microseconds, rounding to nearest.
func micros(sec float64) int64 {
	if sec <= 0 {
		return 0
	}
	return int64(sec*1e6 + 0.5)
}
