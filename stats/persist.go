package stats

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/cachesvc/cachesvc/cachekey"
)

// Key layout of the stats database:
//
//	t/<ns>\x00<backend>           Counters, all time
//	m/<minute BE64><ns>\x00<be>   Counters of one minute (TTL MinuteRetention)
//	h/<hour BE64><ns>\x00<be>     Counters of one hour (TTL HourRetention)
//	r/<run>                       Run (no TTL: collect folds idle runs into Other)
//	e/<ns>\x00<key hex>           Entry (TTL HourRetention)
//	x/<ns>                        persistedMisses
//	a/<ns>                        namespace admitted (empty value)
//	b/<backend>                   backend admitted (empty value)
//	g/t                           Global, all time
//	g/u                           Usage, last sample
//	g/r                           run evictions (RunEvictions), all time
//	g/s                           Unix seconds since which every minute has a g/m record
//	g/m/<minute BE64>             Global of one minute (TTL MinuteRetention)
//	g/h/<hour BE64>               Global of one hour (TTL HourRetention)
const (
	pTotals  = "t/"
	pMinute  = "m/"
	pHour    = "h/"
	pRun     = "r/"
	pEntry   = "e/"
	pMisses  = "x/"
	pAdmit   = "a/"
	pBackend = "b/"
	kGlobal  = "g/t"
	kUsage   = "g/u"
	kRunEv   = "g/r"
	kSampled = "g/s"
	pGMinute = "g/m/"
	pGHour   = "g/h/"
)

type persistedMisses struct {
	Recent  []Miss           `json:"recent"` // oldest first
	Reasons map[string]int64 `json:"reasons"`
}

func bucketKey(prefix string, bucket int64, ns, backend string) []byte {
	k := make([]byte, 0, len(prefix)+8+len(ns)+1+len(backend))
	k = append(k, prefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(bucket))
	if ns != "" || backend != "" {
		k = append(k, ns...)
		k = append(k, 0)
		k = append(k, backend...)
	}
	return k
}

// parseBucketKey splits a bucket key after its prefix.
func parseBucketKey(k []byte, prefix string) (bucket int64, ns, backend string, ok bool) {
	rest := k[len(prefix):]
	if len(rest) < 8 {
		return 0, "", "", false
	}
	bucket = int64(binary.BigEndian.Uint64(rest[:8]))
	ns, backend, ok = strings.Cut(string(rest[8:]), "\x00")
	return bucket, ns, backend, ok
}

// Flush merges what was recorded and writes it to the database. The flush
// loop calls it every FlushInterval; queries of time series call it first so
// that they are exact. While the directory is gone or not writable it
// writes nothing and returns nil: what was recorded waits in memory for
// the first flush that can save it (logged once at WARN).
func (s *Stats) Flush() error {
	return s.flush()
}

func (s *Stats) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.collect()
	// The dirty state stays in the aggregate, to be saved by the first
	// flush that can: a write Badger cannot complete ends the process
	// (dirguard.go).
	err := s.DirErr()
	s.noteDir(err)
	if err != nil {
		s.trimUnsaved(s.cfg.Now())
		return nil
	}

	// Take the dirty state under the lock, write it without.
	a := &s.agg
	a.mu.Lock()
	minutes := a.minutes
	a.minutes = make(map[seriesKey]*Counters)
	totals := make(map[nsBackend]Counters, len(a.dirtyTotals))
	for nb := range a.dirtyTotals {
		totals[nb] = *a.totals[nb]
	}
	clear(a.dirtyTotals)
	runs := make([]Run, 0, len(a.dirtyRuns))
	for id := range a.dirtyRuns {
		r := *a.runs[id]
		r.Namespaces = append([]string(nil), r.Namespaces...)
		runs = append(runs, r)
	}
	clear(a.dirtyRuns)
	entries := make([]Entry, 0, len(a.dirtyEntries))
	for k := range a.dirtyEntries {
		entries = append(entries, *a.entries[k])
	}
	clear(a.dirtyEntries)
	// Read with the runs: the evictions counted are those whose runs
	// this flush writes folded into Other (or a few more, not yet merged).
	runEvictions := s.runs.evictions.Load()
	dead := a.dead
	a.dead = deadKeys{}
	// A relabelled total that is live again (its namespace was admitted
	// since) must not be deleted.
	live := dead.totals[:0:0]
	for _, nb := range dead.totals {
		if a.totals[nb] == nil {
			live = append(live, nb)
		}
	}
	dead.totals = live
	var global *Global
	var usage Usage
	var sampledSince int64
	gmin := a.globalMinutes
	if a.dirtyGlobal {
		g := a.global
		global = &g
		usage = a.lastUsage
		sampledSince = a.sampledSince
		a.globalMinutes = make(map[int64]*Global)
		a.dirtyGlobal = false
	}
	a.mu.Unlock()

	a.missMu.Lock()
	deadMisses := dead.misses[:0:0]
	for _, ns := range dead.misses {
		if a.misses[ns] == nil {
			deadMisses = append(deadMisses, ns)
		}
	}
	dead.misses = deadMisses
	misses := make(map[string]persistedMisses, len(a.dirtyMisses))
	for ns := range a.dirtyMisses {
		pm := persistedMisses{Reasons: make(map[string]int64, len(a.reasons[ns]))}
		for r, n := range a.reasons[ns] {
			pm.Reasons[r] = n
		}
		if r := a.misses[ns]; r != nil {
			recent := r.newestFirst(len(r.items))
			for i, j := 0, len(recent)-1; i < j; i, j = i+1, j-1 {
				recent[i], recent[j] = recent[j], recent[i]
			}
			pm.Recent = recent
		}
		misses[ns] = pm
	}
	clear(a.dirtyMisses)
	a.missMu.Unlock()
	admitted := s.namespaces.takeAdded()
	admittedBackends := s.backends.takeAdded()

	w := newBatch(s.db)
	// Deletions first: a key forgotten and recorded again since the last
	// flush is both dead and dirty, and the write must win.
	for _, id := range dead.runs {
		w.del([]byte(pRun + id))
	}
	for _, k := range dead.entries {
		w.del([]byte(pEntry + k.ns + "\x00" + hex.EncodeToString(k.key[:])))
	}
	for _, nb := range dead.totals {
		w.del([]byte(pTotals + nb.ns + "\x00" + nb.backend))
	}
	for _, ns := range dead.misses {
		w.del([]byte(pMisses + ns))
	}
	for _, ns := range dead.admitted {
		w.del([]byte(pAdmit + ns))
	}
	for _, be := range dead.admittedBackends {
		w.del([]byte(pBackend + be))
	}
	// Minute and hour buckets are read-modify-write: a bucket may be flushed
	// several times, and may predate a restart.
	hours := make(map[seriesKey]*Counters)
	for k, c := range minutes {
		hk := seriesKey{minute: k.minute / 60, ns: k.ns, backend: k.backend}
		h := hours[hk]
		if h == nil {
			h = new(Counters)
			hours[hk] = h
		}
		h.add(c)
		w.addCounters(bucketKey(pMinute, k.minute, k.ns, k.backend), c, s.cfg.MinuteRetention)
	}
	for k, c := range hours {
		w.addCounters(bucketKey(pHour, k.minute, k.ns, k.backend), c, s.cfg.HourRetention)
	}
	for nb, c := range totals {
		w.setJSON([]byte(pTotals+nb.ns+"\x00"+nb.backend), c, 0)
	}
	// No TTL: a run idle for RunTTL folds into Other (collect), which a
	// record expiring while the server is down would skip, losing its
	// counts; Other itself never expires. The run table bounds the records.
	for _, r := range runs {
		w.setJSON([]byte(pRun+r.Run), r, 0)
	}
	for _, e := range entries {
		w.setJSON([]byte(pEntry+e.Namespace+"\x00"+e.Key), e, s.cfg.HourRetention)
	}
	if global != nil {
		w.setJSON([]byte(kGlobal), global, 0)
		w.setJSON([]byte(kUsage), usage, 0)
		if sampledSince != 0 {
			w.setJSON([]byte(kSampled), sampledSince, 0)
		}
		ghours := make(map[int64]*Global)
		// In time order: an hour's record takes its last minute's sizes.
		for _, m := range slices.Sorted(maps.Keys(gmin)) {
			g := gmin[m]
			w.addGlobal(bucketKey(pGMinute, m, "", ""), g, s.cfg.MinuteRetention)
			h := ghours[m/60]
			if h == nil {
				h = new(Global)
				ghours[m/60] = h
			}
			h.Evictions += g.Evictions
			h.IntegrityFailures += g.IntegrityFailures
			takeSizes(h, g)
			if g.NamespaceBytes != nil {
				h.NamespaceBytes = g.NamespaceBytes
			}
			h.Sampled = h.Sampled || g.Sampled
		}
		for hr, g := range ghours {
			w.addGlobal(bucketKey(pGHour, hr, "", ""), g, s.cfg.HourRetention)
		}
	}
	for ns, pm := range misses {
		w.setJSON([]byte(pMisses+ns), pm, 0)
	}
	if runEvictions != s.savedRunEvictions {
		w.setJSON([]byte(kRunEv), runEvictions, 0)
	}
	for _, ns := range admitted {
		w.apply(func(txn *badger.Txn) error { return txn.Set([]byte(pAdmit+ns), nil) })
	}
	for _, be := range admittedBackends {
		w.apply(func(txn *badger.Txn) error { return txn.Set([]byte(pBackend+be), nil) })
	}
	if err := w.finish(); err != nil {
		s.namespaces.putAdded(admitted)
		s.backends.putAdded(admittedBackends)
		s.restore(minutes, gmin, totals, runs, entries, dead, global != nil, misses, w.committed)
		return fmt.Errorf("flush stats: %w", err)
	}
	s.savedRunEvictions = runEvictions
	return nil
}

// restore puts back what a failed flush took, so that the next flush writes
// it: absolute values (totals, runs, entries, misses, store counters) are
// marked dirty again; bucket deltas are merged back unless part of the batch
// was already committed (then re-adding them could count them twice, and
// losing them only thins the time series).
func (s *Stats) restore(minutes map[seriesKey]*Counters, gmin map[int64]*Global, totals map[nsBackend]Counters, runs []Run, entries []Entry,
	dead deadKeys, global bool, misses map[string]persistedMisses, partial bool) {
	a := &s.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	for nb := range totals {
		a.dirtyTotals[nb] = true
	}
	for _, r := range runs {
		if a.runs[r.Run] != nil {
			a.dirtyRuns[r.Run] = true
		}
	}
	for _, e := range entries {
		if k, err := cachekey.ParseKey(e.Key); err == nil && a.entries[entryKey{e.Namespace, [32]byte(k)}] != nil {
			a.dirtyEntries[entryKey{e.Namespace, [32]byte(k)}] = true
		}
	}
	a.dead.add(dead)
	a.missMu.Lock()
	for ns := range misses {
		a.dirtyMisses[ns] = true
	}
	a.missMu.Unlock()
	if global {
		a.dirtyGlobal = true
	}
	if partial {
		return
	}
	for k, c := range minutes {
		m := a.minutes[k]
		if m == nil {
			m = new(Counters)
			a.minutes[k] = m
		}
		m.add(c)
	}
	if global {
		for m, g := range gmin {
			cur := a.globalMinutes[m]
			if cur == nil {
				cur = new(Global)
				a.globalMinutes[m] = cur
			}
			cur.Evictions += g.Evictions
			cur.IntegrityFailures += g.IntegrityFailures
			// A minute sampled since keeps its newer sample (an empty
			// store's 0 bytes included).
			if !cur.Sampled {
				cur.StoreBytes, cur.StoreEntries, cur.MaxBytes, cur.Uncounted = g.StoreBytes, g.StoreEntries, g.MaxBytes, g.Uncounted
				cur.Sampled = g.Sampled
			}
			if cur.NamespaceBytes == nil {
				cur.NamespaceBytes = g.NamespaceBytes
			}
		}
	}
}

// batch writes in as many transactions as Badger's size limits need.
type batch struct {
	db        *badger.DB
	txn       *badger.Txn
	err       error
	committed bool // a transaction was committed before the last
}

func newBatch(db *badger.DB) *batch { return &batch{db: db, txn: db.NewTransaction(true)} }

// apply runs fn in the current transaction, committing and retrying in a
// fresh one when the transaction is full.
func (b *batch) apply(fn func(*badger.Txn) error) {
	if b.err != nil {
		return
	}
	err := fn(b.txn)
	if errors.Is(err, badger.ErrTxnTooBig) {
		if b.err = b.txn.Commit(); b.err != nil {
			return
		}
		b.committed = true
		b.txn = b.db.NewTransaction(true)
		err = fn(b.txn)
	}
	b.err = err
}

func entry(k, v []byte, ttl time.Duration) *badger.Entry {
	e := badger.NewEntry(k, v)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	return e
}

func (b *batch) setJSON(k []byte, v any, ttl time.Duration) {
	data, err := json.Marshal(v)
	if err != nil {
		b.err = fmt.Errorf("encode %q: %w", k, err)
		return
	}
	b.apply(func(txn *badger.Txn) error { return txn.SetEntry(entry(k, data, ttl)) })
}

func (b *batch) del(k []byte) {
	b.apply(func(txn *badger.Txn) error { return txn.Delete(k) })
}

// readJSON decodes the value under k into v; a missing key leaves v alone.
func readJSON(txn *badger.Txn, k []byte, v any) error {
	it, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return it.Value(func(val []byte) error { return json.Unmarshal(val, v) })
}

func (b *batch) addCounters(k []byte, d *Counters, ttl time.Duration) {
	b.apply(func(txn *badger.Txn) error {
		var c Counters
		if err := readJSON(txn, k, &c); err != nil {
			return fmt.Errorf("read %q: %w", k, err)
		}
		c.clampNegative() // a bucket written before sums saturated
		c.add(d)
		data, _ := json.Marshal(c)
		return txn.SetEntry(entry(k, data, ttl))
	})
}

func (b *batch) addGlobal(k []byte, d *Global, ttl time.Duration) {
	b.apply(func(txn *badger.Txn) error {
		var g Global
		if err := readJSON(txn, k, &g); err != nil {
			return fmt.Errorf("read %q: %w", k, err)
		}
		g.Evictions += d.Evictions
		g.IntegrityFailures += d.IntegrityFailures
		takeSizes(&g, d)
		if d.NamespaceBytes != nil {
			g.NamespaceBytes = d.NamespaceBytes
		}
		g.Sampled = g.Sampled || d.Sampled
		data, _ := json.Marshal(g)
		return txn.SetEntry(entry(k, data, ttl))
	})
}

func (b *batch) finish() error {
	if b.err != nil {
		b.txn.Discard()
		return b.err
	}
	return b.txn.Commit()
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
