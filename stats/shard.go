package stats

import (
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cachesvc/cachesvc/wire"
)

// shard picks a shard: by key when there is one, otherwise round robin.
func (s *Stats) shard(ns string, key [32]byte) *shard {
	var i uint32
	if key != ([32]byte{}) {
		i = uint32(key[0]) ^ uint32(key[7])<<3
	} else {
		i = s.rr.Add(1)
	}
	return &s.shards[i%numShards]
}

// shard holds events recorded since the last merge. Its maps are keyed by
// the data pointers of the limiters' canonical strings (hashing a pointer is
// much cheaper than hashing strings); the values carry the strings.
type shard struct {
	mu      sync.Mutex
	series  map[shardSeriesKey]*shardSeries
	runs    map[*runSlot]*runDelta
	entries map[shardEntryKey]*entryDelta
	_       [64]byte // keep shards' locks on separate cache lines
}

type shardSeriesKey struct {
	minute int64
	ns, be *byte
}

type shardSeries struct {
	ns, backend string
	c           Counters
}

type shardEntryKey struct {
	ns  *byte
	key [32]byte
}

// seriesKey identifies a namespace × backend × minute (or hour) bucket.
type seriesKey struct {
	minute      int64
	ns, backend string
}

type runDelta struct {
	ns          string
	first, last time.Time
	firstHit    time.Time // zero until the run's first hit in this delta
	c           Counters
}

// entryKey identifies an entry.
type entryKey struct {
	ns  string
	key [32]byte
}

type entryDelta struct {
	ns, name, backend string
	compileSeconds    float64
	hits              int64
	savedMicros       int64
}

// maxShardEntries bounds the entries a shard accumulates between merges;
// hits on further entries still count everywhere but in "top entries".
const maxShardEntries = 1024

func (sh *shard) reset() {
	sh.series = make(map[shardSeriesKey]*shardSeries)
	sh.runs = make(map[*runSlot]*runDelta)
	sh.entries = make(map[shardEntryKey]*entryDelta)
}

// addSeries adds c to the bucket of (minute, ns, backend); ns and backend
// must be canonical strings from the limiters.
func (sh *shard) addSeries(minute int64, ns, backend string, c *Counters) {
	k := shardSeriesKey{minute, unsafe.StringData(ns), unsafe.StringData(backend)}
	p := sh.series[k]
	if p == nil {
		p = &shardSeries{ns: ns, backend: backend}
		sh.series[k] = p
	}
	p.c.add(c)
}

func (sh *shard) addRun(run *runSlot, ns string, now time.Time, c *Counters) {
	r := sh.runs[run]
	if r == nil {
		r = &runDelta{ns: ns, first: now}
		sh.runs[run] = r
	}
	r.last = now
	if c.Hits > 0 && r.firstHit.IsZero() {
		r.firstHit = now
	}
	r.c.add(c)
}

func (sh *shard) addEntry(ns string, key [32]byte, name, backend string, compileSeconds float64, saved int64) {
	k := shardEntryKey{unsafe.StringData(ns), key}
	e := sh.entries[k]
	if e == nil {
		if len(sh.entries) >= maxShardEntries {
			return
		}
		e = &entryDelta{ns: ns, name: strings.Clone(wire.SanitizeName(name)), backend: backend, compileSeconds: compileSeconds}
		sh.entries[k] = e
	}
	e.hits++
	e.savedMicros = satAdd(e.savedMicros, saved)
}

// take swaps out the shard's maps.
func (sh *shard) take() (map[shardSeriesKey]*shardSeries, map[*runSlot]*runDelta, map[shardEntryKey]*entryDelta) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.series) == 0 && len(sh.runs) == 0 && len(sh.entries) == 0 {
		return nil, nil, nil
	}
	se, ru, en := sh.series, sh.runs, sh.entries
	sh.reset()
	return se, ru, en
}
