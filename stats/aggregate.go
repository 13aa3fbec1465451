package stats

import (
	"encoding/hex"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// nsBackend identifies a namespace × backend series.
type nsBackend struct{ ns, backend string }

// Run is what one run id (X-Cachesvc-Run) did.
type Run struct {
	Run        string    `json:"run"`
	Namespaces []string  `json:"namespaces"`
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	// FirstHit is when the run's first hit was counted; zero before one.
	// FirstHit-FirstSeen is the run's time to first hit, how long a new
	// arm of a sweep compiled before the cache started paying.
	FirstHit time.Time `json:"first_hit,omitzero"`
	Counters Counters  `json:"counters"`
	// Seq is the admission number of the run's slot (runSlot.seq): the
	// run table evicts, of the runs last seen in the same second, the
	// first admitted, and load re-admits the runs in this order so that a
	// restart keeps it. 0 for Other and in records written before it.
	Seq uint64 `json:"seq,omitempty"`

	// slot is the run's slot in the run table (see runTable); the record
	// is folded into Other once the slot is gone.
	slot *runSlot
}

// maxRunNamespaces bounds Run.Namespaces.
const maxRunNamespaces = 8

// Entry is one entry's hits and the compile time they saved.
type Entry struct {
	Namespace      string    `json:"namespace"`
	Key            string    `json:"key"`
	Name           string    `json:"name,omitempty"`
	Backend        string    `json:"backend"`
	CompileSeconds float64   `json:"compile_seconds"`
	Hits           int64     `json:"hits"`
	SavedMicros    int64     `json:"saved_us"`
	LastHit        time.Time `json:"last_hit"`
}

// Usage is the part of the store's usage that stats samples; it mirrors
// store.Usage so that this package does not depend on the store.
type Usage struct {
	Entries           int64
	Bytes             int64
	MaxBytes          int64
	Evictions         int64
	IntegrityFailures int64
	// Namespaces are the bytes each namespace stores (nil: not known).
	Namespaces map[string]int64
	// Uncounted says Entries and Bytes are no count (a shared tier whose
	// bucket was not listed yet, wire.StoreUsage.Uncounted): the sample's
	// step is sampled, with a null size.
	Uncounted bool
}

// UsageOf is the part of a store's usage (store.Usage) that stats samples.
func UsageOf(u wire.StoreUsage) Usage {
	return Usage{Entries: u.Entries, Bytes: u.Bytes, MaxBytes: u.MaxBytes, Evictions: u.Evictions, IntegrityFailures: u.IntegrityFailures,
		Namespaces: NamespaceBytes(u.Namespaces), Uncounted: u.Uncounted != ""}
}

// NamespaceBytes is a store usage's bytes per namespace, as Usage takes
// them; nil for none.
func NamespaceBytes(nu []wire.NamespaceUsage) map[string]int64 {
	if len(nu) == 0 {
		return nil
	}
	m := make(map[string]int64, len(nu))
	for _, n := range nu {
		m[n.Namespace] = n.Bytes
	}
	return m
}

// Global is the wire type of the same name (wire).
type Global = wire.Global

// deadKeys are records to delete from the database: runs and entries
// forgotten, totals and misses that load relabelled (their counts now live
// under another key), and admissions of namespaces and backends beyond
// the caps.
type deadKeys struct {
	runs             []string
	entries          []entryKey
	totals           []nsBackend
	misses           []string // namespaces
	admitted         []string
	admittedBackends []string
}

func (d *deadKeys) add(o deadKeys) {
	d.runs = append(d.runs, o.runs...)
	d.entries = append(d.entries, o.entries...)
	d.totals = append(d.totals, o.totals...)
	d.misses = append(d.misses, o.misses...)
	d.admitted = append(d.admitted, o.admitted...)
	d.admittedBackends = append(d.admittedBackends, o.admittedBackends...)
}

// aggregate is the merged, in-memory state between flushes. Everything the
// totals endpoints report is here; the time series are in Badger plus the
// unflushed deltas in minutes.
type aggregate struct {
	mu           sync.Mutex
	started      time.Time
	totals       map[nsBackend]*Counters
	dirtyTotals  map[nsBackend]bool
	minutes      map[seriesKey]*Counters // deltas since the last flush
	runs         map[string]*Run
	dirtyRuns    map[string]bool
	entries      map[entryKey]*Entry
	dirtyEntries map[entryKey]bool
	dead         deadKeys // records to delete at the next flush
	runLog       runEvictionLog

	global        Global            // all-time evictions, failures; last sizes
	globalMinutes map[int64]*Global // deltas since the last flush
	lastUsage     Usage             // last sample, for deltas
	lastNSBytes   map[string]int64  // last sample's bytes per namespace label
	haveUsage     bool
	dirtyGlobal   bool
	// sampledMinute is the minute of the last record in globalMinutes, so
	// that every minute the server runs has one (a heartbeat), changed or
	// not: a step without one is a step without a sample.
	sampledMinute int64
	// sampledSince is when records began to be written every minute
	// (Unix seconds, persisted; 0: never). Before it, records were written
	// only when a figure changed, so a step without one was no gap.
	sampledSince int64

	// missMu guards the recent misses apart from mu, so that recording a
	// miss never waits for a snapshot being built.
	missMu      sync.Mutex
	misses      map[string]*missRing
	reasons     map[string]map[string]int64 // ns → reason → count
	dirtyMisses map[string]bool
}

func (a *aggregate) init() {
	a.totals = make(map[nsBackend]*Counters)
	a.dirtyTotals = make(map[nsBackend]bool)
	a.minutes = make(map[seriesKey]*Counters)
	a.runs = make(map[string]*Run)
	a.dirtyRuns = make(map[string]bool)
	a.entries = make(map[entryKey]*Entry)
	a.dirtyEntries = make(map[entryKey]bool)
	a.globalMinutes = make(map[int64]*Global)
	a.misses = make(map[string]*missRing)
	a.reasons = make(map[string]map[string]int64)
	a.dirtyMisses = make(map[string]bool)
}

// collect merges every shard into the aggregate and samples the store's
// usage. It does no I/O (Config.Usage is expected to be cheap).
func (s *Stats) collect() {
	now := s.cfg.Now()
	var us Usage
	if s.cfg.Usage != nil {
		us = s.cfg.Usage()
	}
	a := &s.agg
	a.mu.Lock()
	s.collectLocked(now, us)
	logArgs := s.takeRunLog(now)
	a.mu.Unlock()
	if logArgs != nil {
		s.cfg.Logger.Warn("stats: run table full: new runs took the slots of the least recently seen runs (of the namespace holding the most runs), "+
			"whose counts moved to the run "+Other+"; many evictions mean many run ids (a busy CI, or a client making them up)", logArgs...)
	}
}

// collectLocked is collect with a.mu held.
func (s *Stats) collectLocked(now time.Time, us Usage) {
	a := &s.agg
	for i := range s.shards {
		se, ru, en := s.shards[i].take()
		for sk, v := range se {
			k, c := seriesKey{minute: sk.minute, ns: v.ns, backend: v.backend}, &v.c
			nb := nsBackend{k.ns, k.backend}
			t := a.totals[nb]
			if t == nil {
				t = new(Counters)
				a.totals[nb] = t
			}
			t.add(c)
			a.dirtyTotals[nb] = true
			m := a.minutes[k]
			if m == nil {
				m = new(Counters)
				a.minutes[k] = m
			}
			m.add(c)
		}
		for sl, d := range ru {
			if sl.gone.Load() {
				// Recorded before its slot went: Other's.
				sl = s.runs.other
			}
			id := sl.name
			r := a.runs[id]
			if r != nil && r.slot != sl {
				// The record of an earlier slot of the same run id.
				s.foldRun(r)
				r = nil
			}
			if r == nil {
				r = &Run{Run: id, FirstSeen: d.first, Seq: sl.seq, slot: sl}
				a.runs[id] = r
			}
			if d.last.After(r.LastSeen) {
				r.LastSeen = d.last
			}
			r.FirstHit = earliest(r.FirstHit, d.firstHit)
			if !contains(r.Namespaces, d.ns) && len(r.Namespaces) < maxRunNamespaces {
				r.Namespaces = append(r.Namespaces, d.ns)
				sort.Strings(r.Namespaces)
				if sl != s.runs.other {
					s.runs.setNamespace(sl, r.Namespaces[0])
				}
			}
			r.Counters.add(&d.c)
			a.dirtyRuns[id] = true
		}
		for sk, d := range en {
			k := entryKey{ns: d.ns, key: sk.key}
			e := a.entries[k]
			if e == nil {
				e = &Entry{Namespace: k.ns, Key: hex.EncodeToString(k.key[:]), Name: d.name, Backend: d.backend, CompileSeconds: d.compileSeconds}
				a.entries[k] = e
			}
			e.Hits = satAdd(e.Hits, d.hits)
			e.SavedMicros = satAdd(e.SavedMicros, d.savedMicros)
			e.LastHit = now
			a.dirtyEntries[k] = true
		}
	}
	// Bound the tracked entries: drop the least saving quarter.
	if len(a.entries) > s.cfg.MaxEntries {
		all := make([]entryKey, 0, len(a.entries))
		for k := range a.entries {
			all = append(all, k)
		}
		sort.Slice(all, func(i, j int) bool { return a.entries[all[i]].SavedMicros < a.entries[all[j]].SavedMicros })
		drop := len(all) - s.cfg.MaxEntries*3/4
		for _, k := range all[:drop] {
			delete(a.entries, k)
			delete(a.dirtyEntries, k)
			a.dead.entries = append(a.dead.entries, k)
		}
	}
	// Fold the runs evicted from the run table, and those idle for longer
	// than RunTTL, into Other. Other itself stays, however idle: it holds
	// the counts of every run folded so far.
	for _, r := range a.runs {
		if r.slot == s.runs.other {
			continue
		}
		if r.slot.gone.Load() || now.Sub(r.LastSeen) > s.cfg.RunTTL {
			s.runs.forget(r.slot)
			s.foldRun(r)
		}
	}
	if s.cfg.Usage != nil {
		dEv, dInt := us.Evictions, us.IntegrityFailures
		if a.haveUsage {
			dEv = delta(us.Evictions, a.lastUsage.Evictions)
			dInt = delta(us.IntegrityFailures, a.lastUsage.IntegrityFailures)
		} else {
			// First sample since Open: the store's counters count since
			// it opened, with this process (Config.Usage), so all of them
			// are new. The last persisted sample is the previous
			// process's: a delta from it lost that process's final count
			// whenever this one's had reached it (evictions down to a
			// lowered --max-size at open, say).
			a.haveUsage = true
		}
		nsBytes := s.namespaceBytes(us.Namespaces)
		minute := now.Unix() / 60
		sample := Global{StoreBytes: us.Bytes, StoreEntries: us.Entries, MaxBytes: us.MaxBytes, Uncounted: us.Uncounted}
		sizesChanged := us.Uncounted != a.lastUsage.Uncounted ||
			!us.Uncounted && (us.Bytes != a.global.StoreBytes || us.Entries != a.global.StoreEntries || us.MaxBytes != a.global.MaxBytes)
		if dEv != 0 || dInt != 0 || sizesChanged || !maps.Equal(nsBytes, a.lastNSBytes) || minute != a.sampledMinute {
			a.global.Evictions += dEv
			a.global.IntegrityFailures += dInt
			// The totals keep the last count, and say whether the last
			// sample was one.
			if !us.Uncounted {
				a.global.StoreBytes, a.global.StoreEntries, a.global.MaxBytes = us.Bytes, us.Entries, us.MaxBytes
			}
			a.global.Uncounted = us.Uncounted
			g := a.globalMinutes[minute]
			if g == nil {
				g = new(Global)
				a.globalMinutes[minute] = g
			}
			g.Evictions += dEv
			g.IntegrityFailures += dInt
			takeSizes(g, &sample)
			g.NamespaceBytes = nsBytes
			g.Sampled = true
			a.lastNSBytes = nsBytes
			a.sampledMinute = minute
			if a.sampledSince == 0 {
				a.sampledSince = minute * 60
			}
			a.dirtyGlobal = true
		}
		a.lastUsage = us
	}
}

// takeSizes gives dst, a record of sizes, those of src, a later sample: a
// counted sample replaces them; an uncounted one (the shared tier not listed
// yet: its bytes are no count) marks dst uncounted only where dst holds no
// counted sizes, so a step or a total keeps the last count it had rather
// than taking a 0 that is no count.
func takeSizes(dst, src *Global) {
	counted := !dst.Uncounted && (dst.Sampled || dst.StoreBytes != 0 || dst.StoreEntries != 0 || dst.MaxBytes != 0)
	switch {
	case !src.Uncounted:
		dst.StoreBytes, dst.StoreEntries, dst.MaxBytes, dst.Uncounted = src.StoreBytes, src.StoreEntries, src.MaxBytes, false
	case !counted:
		dst.StoreBytes, dst.StoreEntries, dst.MaxBytes, dst.Uncounted = src.StoreBytes, src.StoreEntries, src.MaxBytes, true
	}
}

// namespaceBytes relabels a sample's per-namespace bytes by the stats'
// namespace labels (bounded: the rest sum under Other); nil for none.
func (s *Stats) namespaceBytes(in map[string]int64) map[string]int64 {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]int64, len(in))
	for ns, b := range in {
		out[s.namespaces.labelOf(ns)] += b
	}
	return out
}

// delta is cur-prev for a counter that may have restarted from zero.
func delta(cur, prev int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// earliest returns the earlier of two times, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
