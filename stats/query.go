package stats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cachesvc/cachesvc/wire"
	"github.com/dgraph-io/badger/v4"
)

// BackendTotals is the wire type of the same name (wire).
type BackendTotals = wire.BackendTotals

// NamespaceTotals is the wire type of the same name (wire).
type NamespaceTotals = wire.NamespaceTotals

// RunTotals is the wire type of the same name (wire).
type RunTotals = wire.RunTotals

// TopEntry is the wire type of the same name (wire).
type TopEntry = wire.TopEntry

// Snapshot is the wire type of the same name (wire).
type Snapshot = wire.Snapshot

// SnapshotOptions narrow a Snapshot. The zero value means everything.
type SnapshotOptions struct {
	// Namespace, when set, limits the snapshot to one namespace.
	Namespace string
	// MaxRuns and MaxTopEntries bound the lists; defaults 100 and 20.
	MaxRuns       int
	MaxTopEntries int
}

// Snapshot merges what was recorded and returns the totals. It does no I/O.
func (s *Stats) Snapshot(opt SnapshotOptions) Snapshot {
	if opt.MaxRuns <= 0 {
		opt.MaxRuns = 100
	}
	if opt.MaxTopEntries <= 0 {
		opt.MaxTopEntries = 20
	}
	s.collect()
	a := &s.agg
	// Copy what is needed under the lock; sort and sum outside it.
	a.mu.Lock()
	snap := Snapshot{
		GeneratedAt:   s.cfg.Now().UTC(),
		Namespaces:    []NamespaceTotals{},
		Backends:      []BackendTotals{},
		Runs:          []RunTotals{},
		TopEntries:    []TopEntry{},
		StoreCounters: a.global,
	}
	totals := make(map[nsBackend]Counters, len(a.totals))
	for nb, c := range a.totals {
		if opt.Namespace == "" || nb.ns == opt.Namespace {
			totals[nb] = *c
		}
	}
	for _, r := range a.runs {
		if opt.Namespace != "" && !contains(r.Namespaces, opt.Namespace) {
			continue
		}
		snap.Runs = append(snap.Runs, RunTotals{Run: r.Run, Namespaces: append([]string(nil), r.Namespaces...), FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, FirstHit: r.FirstHit, Totals: r.Counters.Totals()})
	}
	for _, e := range a.entries {
		if opt.Namespace != "" && e.Namespace != opt.Namespace {
			continue
		}
		snap.TopEntries = append(snap.TopEntries, TopEntry{Namespace: e.Namespace, Key: e.Key, Name: e.Name, Backend: e.Backend, CompileSeconds: e.CompileSeconds, Hits: e.Hits, SecondsSaved: float64(e.SavedMicros) / 1e6, LastHit: e.LastHit})
	}
	a.mu.Unlock()

	var all Counters
	perNS := map[string]*Counters{}
	perNSBackend := map[string][]BackendTotals{}
	perBackend := map[string]*Counters{}
	for nb, c := range totals {
		all.add(&c)
		if perNS[nb.ns] == nil {
			perNS[nb.ns] = new(Counters)
		}
		perNS[nb.ns].add(&c)
		if perBackend[nb.backend] == nil {
			perBackend[nb.backend] = new(Counters)
		}
		perBackend[nb.backend].add(&c)
		perNSBackend[nb.ns] = append(perNSBackend[nb.ns], BackendTotals{Backend: nb.backend, Totals: c.Totals()})
	}
	snap.Totals = all.Totals()
	for ns, c := range perNS {
		bs := perNSBackend[ns]
		sort.Slice(bs, func(i, j int) bool { return bs[i].Backend < bs[j].Backend })
		snap.Namespaces = append(snap.Namespaces, NamespaceTotals{Namespace: ns, Totals: c.Totals(), Backends: bs})
	}
	sort.Slice(snap.Namespaces, func(i, j int) bool { return snap.Namespaces[i].Namespace < snap.Namespaces[j].Namespace })
	for be, c := range perBackend {
		snap.Backends = append(snap.Backends, BackendTotals{Backend: be, Totals: c.Totals()})
	}
	sort.Slice(snap.Backends, func(i, j int) bool { return snap.Backends[i].Backend < snap.Backends[j].Backend })
	sort.Slice(snap.Runs, func(i, j int) bool {
		if !snap.Runs[i].LastSeen.Equal(snap.Runs[j].LastSeen) {
			return snap.Runs[i].LastSeen.After(snap.Runs[j].LastSeen)
		}
		return snap.Runs[i].Run < snap.Runs[j].Run
	})
	if len(snap.Runs) > opt.MaxRuns {
		snap.Runs = snap.Runs[:opt.MaxRuns]
	}
	sort.Slice(snap.TopEntries, func(i, j int) bool {
		if snap.TopEntries[i].SecondsSaved != snap.TopEntries[j].SecondsSaved {
			return snap.TopEntries[i].SecondsSaved > snap.TopEntries[j].SecondsSaved
		}
		return snap.TopEntries[i].Key < snap.TopEntries[j].Key
	})
	if len(snap.TopEntries) > opt.MaxTopEntries {
		snap.TopEntries = snap.TopEntries[:opt.MaxTopEntries]
	}
	reasons := map[string]int64{}
	a.missMu.Lock()
	for ns, rc := range a.reasons {
		if opt.Namespace != "" && ns != opt.Namespace {
			continue
		}
		for r, n := range rc {
			reasons[r] += n
		}
	}
	a.missMu.Unlock()
	snap.MissReasons = reasonCounts(reasons)
	return snap
}

// NamespaceEvictions merges what was recorded and returns each tracked
// namespace's persisted evictions by reason (RecordEvictions), the
// namespaces with none left out. It does no I/O; it is cheaper than a
// Snapshot, for a metrics scrape.
func (s *Stats) NamespaceEvictions() map[string]wire.EvictionReasons {
	s.collect()
	a := &s.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]wire.EvictionReasons{}
	for nb, c := range a.totals {
		if c.EvictedBy == (wire.EvictionReasons{}) {
			continue
		}
		e := out[nb.ns]
		addReasons(&e, c.EvictedBy)
		out[nb.ns] = e
	}
	return out
}

// Points is the wire type of the same name (wire).
type Points = wire.Points

// Series is the wire type of the same name (wire).
type Series = wire.Series

// MaxPoints bounds the points of a series; a longer range gets a coarser
// step.
const MaxPoints = 1440

// maxSeriesGroups bounds the per-namespace and per-backend series returned
// (the busiest): enough for the dashboard's table to draw a sparkline on
// every row of a server with a few dozen namespaces, while a response of
// MaxPoints points stays a few megabytes at most.
const maxSeriesGroups = 32

// ErrBadRange is returned for a series query whose since is not before now.
var ErrBadRange = errors.New("since must be before now")

// Series returns the time series of ns ("" for all namespaces, with a series
// per namespace) from since to now in steps of step (rounded to whole
// minutes, or hours when since is older than the minute retention). It
// flushes first so that the series include everything recorded.
func (s *Stats) Series(ns string, since time.Time, step time.Duration) (Series, error) {
	if err := s.flush(); err != nil {
		return Series{}, err
	}
	now := s.cfg.Now()
	if !since.Before(now) {
		return Series{}, ErrBadRange
	}
	res, unit, prefix, gprefix := "minute", int64(60), pMinute, pGMinute
	if now.Sub(since) > s.cfg.MinuteRetention || step >= time.Hour {
		res, unit, prefix, gprefix = "hour", 3600, pHour, pGHour
	}
	st := int64(step / time.Second)
	if st < unit {
		st = unit
	}
	st = (st + unit - 1) / unit * unit
	from := since.Unix() / st * st
	to := now.Unix()
	if n := (to-from)/st + 1; n > MaxPoints {
		st = ((to-from)/(MaxPoints-1) + unit - 1) / unit * unit
		from = since.Unix() / st * st
	}
	npts := int((to-from)/st + 1)
	out := Series{Namespace: ns, Since: time.Unix(from, 0).UTC(), Until: now.UTC(), Step: st, Resolution: res,
		Time: make([]int64, npts), Backends: map[string]Points{},
		StoreBytes: make([]*int64, npts), StoreEvictions: make([]int64, npts), IntegrityFailures: make([]int64, npts), Sampled: make([]bool, npts)}
	for i := range out.Time {
		out.Time[i] = from + int64(i)*st
	}
	s.agg.mu.Lock()
	sampledSince := s.agg.sampledSince
	s.agg.mu.Unlock()
	total := make([]Counters, npts)
	perNS := map[string][]Counters{}
	perBE := map[string][]Counters{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		p := []byte(prefix)
		for it.Seek(bucketKey(prefix, from/unit, "", "")); it.ValidForPrefix(p); it.Next() {
			b, bns, be, ok := parseBucketKey(it.Item().Key(), prefix)
			if !ok {
				continue
			}
			// Buckets written before labels were checked keep their
			// keys until they expire: report them as their totals are.
			bns, be = s.namespaces.labelOf(bns), s.backends.labelOf(be)
			if ns != "" && bns != ns {
				continue
			}
			i := int((b*unit - from) / st)
			if i < 0 || i >= npts {
				continue
			}
			var c Counters
			if err := it.Item().Value(func(v []byte) error { return jsonUnmarshal(v, &c) }); err != nil {
				return fmt.Errorf("read series bucket: %w", err)
			}
			c.clampNegative() // a bucket written before sums saturated
			total[i].add(&c)
			if ns == "" {
				if perNS[bns] == nil {
					perNS[bns] = make([]Counters, npts)
				}
				perNS[bns][i].add(&c)
			}
			if perBE[be] == nil {
				perBE[be] = make([]Counters, npts)
			}
			perBE[be][i].add(&c)
		}
		gp := []byte(gprefix)
		for it.Seek(bucketKey(gprefix, from/unit, "", "")); it.ValidForPrefix(gp); it.Next() {
			k := it.Item().Key()
			if len(k) != len(gp)+8 {
				continue
			}
			b := int64(binary.BigEndian.Uint64(k[len(gp):]))
			i := int((b*unit - from) / st)
			if i < 0 || i >= npts {
				continue
			}
			var g Global
			if err := it.Item().Value(func(v []byte) error { return jsonUnmarshal(v, &g) }); err != nil {
				return fmt.Errorf("read store series bucket: %w", err)
			}
			// A namespace's series charts its own stored bytes (records
			// older than NamespaceBytes: no sample), never the server's;
			// a namespace absent from a sample stores nothing.
			// An uncounted sample (a shared tier not listed yet) is no
			// size: the step keeps an earlier count, or stays null.
			if ns == "" {
				if !g.Uncounted {
					out.StoreBytes[i] = &g.StoreBytes
				}
			} else if g.NamespaceBytes != nil {
				b := g.NamespaceBytes[ns]
				out.StoreBytes[i] = &b
			}
			out.Sampled[i] = out.Sampled[i] || g.Sampled
			out.StoreEvictions[i] += g.Evictions
			out.IntegrityFailures[i] += g.IntegrityFailures
		}
		return nil
	})
	if err != nil {
		return Series{}, fmt.Errorf("read series: %w", err)
	}
	fillUnsampled(&out, sampledSince)
	out.Total = points(total)
	if ns == "" {
		out.Namespaces = map[string]Points{}
		for _, k := range busiest(perNS, maxSeriesGroups) {
			out.Namespaces[k] = points(perNS[k])
		}
	}
	for _, k := range busiest(perBE, maxSeriesGroups) {
		out.Backends[k] = points(perBE[k])
	}
	return out, nil
}

// fillUnsampled completes the store series of out once its records are
// read. Steps before sampledSince (0: none yet) come from builds that wrote
// a record only when a figure changed: a step without one held the size
// of the step before, and whether the server ran then is unknown, so it is
// taken as sampled. From sampledSince on every minute the server ran has a
// record, so a step without one had no sample: its size stays null and
// Sampled false.
func fillUnsampled(out *Series, sampledSince int64) {
	var last *int64
	for i, t := range out.Time {
		if sampledSince == 0 || t+out.Step <= sampledSince {
			if out.StoreBytes[i] == nil {
				out.StoreBytes[i] = last
			}
			out.Sampled[i] = true
		}
		last = out.StoreBytes[i]
	}
}

// busiest returns up to n keys of m with the most lookups.
func busiest(m map[string][]Counters, n int) []string {
	type kv struct {
		k string
		n int64
	}
	var all []kv
	for k, cs := range m {
		var sum int64
		for _, c := range cs {
			sum += c.Lookups + c.Writes
		}
		all = append(all, kv{k, sum})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].k < all[j].k
	})
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].k)
	}
	return out
}

func points(cs []Counters) Points {
	n := len(cs)
	p := Points{Lookups: make([]int64, n), Hits: make([]int64, n), Misses: make([]int64, n), HitRate: make([]*float64, n),
		BytesIn: make([]int64, n), BytesOut: make([]int64, n), Writes: make([]int64, n), Evictions: make([]int64, n), SecondsSaved: make([]float64, n)}
	for i, c := range cs {
		p.Lookups[i], p.Hits[i], p.Misses[i] = c.Lookups, c.Hits, c.Misses
		p.BytesIn[i], p.BytesOut[i], p.Writes[i], p.Evictions[i] = c.BytesIn, c.BytesOut, c.Writes, c.Evictions
		p.SecondsSaved[i] = float64(c.SavedMicros) / 1e6
		if c.Lookups > 0 {
			r := float64(c.Hits) / float64(c.Lookups)
			p.HitRate[i] = &r
		}
	}
	return p
}
