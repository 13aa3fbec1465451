package stats

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/wire"
)

// load reads the persisted totals, runs, entries, misses and global counters
// into the aggregate and admits their names into the limiters.
//
// What it reads is checked as recording checks it, because a database
// written before labels were checked may hold anything (issue 12, bugs 1
// and 2): a namespace, backend or run that is not valid is relabelled
// (Other, UnknownBackend) and merged with what is already counted there,
// display strings are made valid UTF-8, and negative counters are reset to
// 0 with a warning. Relabelled records are rewritten under their new key
// and deleted under the old one at the next flush, so that a second load
// does not count them twice.
func (s *Stats) load() error {
	a := &s.agg
	a.started = s.cfg.Now()
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		each := func(prefix string, fn func(k string, val []byte) error) error {
			p := []byte(prefix)
			for it.Seek(p); it.ValidForPrefix(p); it.Next() {
				item := it.Item()
				k := string(item.Key()[len(p):])
				if err := item.Value(func(val []byte) error { return fn(k, val) }); err != nil {
					return fmt.Errorf("load %s%s: %w", prefix, k, err)
				}
			}
			return nil
		}
		admitted := map[string]bool{}
		if err := each(pAdmit, func(ns string, _ []byte) error {
			admitted[ns] = true
			return nil
		}); err != nil {
			return err
		}
		admittedBackends := map[string]bool{}
		if err := each(pBackend, func(be string, _ []byte) error {
			admittedBackends[be] = true
			return nil
		}); err != nil {
			return err
		}
		totals := map[nsBackend]Counters{}
		if err := each(pTotals, func(k string, val []byte) error {
			ns, be, _ := strings.Cut(k, "\x00")
			var c Counters
			if err := json.Unmarshal(val, &c); err != nil {
				return err
			}
			totals[nsBackend{ns, be}] = c
			return nil
		}); err != nil {
			return err
		}
		// Totals first: they decide which namespaces and backends are
		// admitted, and so the labels of everything else.
		s.loadTotals(totals, admitted, admittedBackends)
		// What load admitted is on disk already (or needs no mark: it
		// has writes or hits).
		s.namespaces.takeAdded()
		s.backends.takeAdded()
		var runs []Run
		if err := each(pRun, func(k string, val []byte) error {
			var r Run
			if err := json.Unmarshal(val, &r); err != nil {
				return err
			}
			runs = append(runs, r)
			return nil
		}); err != nil {
			return err
		}
		s.loadRuns(runs)
		if err := each(pEntry, func(k string, val []byte) error {
			var e Entry
			if err := json.Unmarshal(val, &e); err != nil {
				return err
			}
			key, err := cachekey.ParseKey(e.Key)
			if err != nil {
				return fmt.Errorf("bad entry key %q: %w", e.Key, err)
			}
			s.loadEntry([32]byte(key), e)
			return nil
		}); err != nil {
			return err
		}
		misses := map[string]persistedMisses{}
		if err := each(pMisses, func(ns string, val []byte) error {
			var pm persistedMisses
			if err := json.Unmarshal(val, &pm); err != nil {
				return err
			}
			misses[ns] = pm
			return nil
		}); err != nil {
			return err
		}
		s.loadMisses(misses)
		if err := readJSON(txn, []byte(kGlobal), &a.global); err != nil {
			return fmt.Errorf("load global: %w", err)
		}
		if err := readJSON(txn, []byte(kUsage), &a.lastUsage); err != nil {
			return fmt.Errorf("load usage: %w", err)
		}
		var runEvictions int64
		if err := readJSON(txn, []byte(kRunEv), &runEvictions); err != nil {
			return fmt.Errorf("load run evictions: %w", err)
		}
		// The log line counts the evictions since the last one: none yet.
		s.runs.evictions.Store(runEvictions)
		a.runLog.evictions, s.savedRunEvictions = runEvictions, runEvictions
		if err := readJSON(txn, []byte(kSampled), &a.sampledSince); err != nil {
			return fmt.Errorf("load sampled since: %w", err)
		}
		if olderRecordSince(txn, a.sampledSince) {
			// An older build (rolled back onto this directory) served
			// since: it wrote a record only when a figure changed, so
			// the minutes it served without one were not downtime. This
			// run's first sample starts the every-minute records anew;
			// the steps before it read as that build's records always did.
			a.sampledSince = 0
		}
		return nil
	})
}

// olderRecordSince reports whether a store record from sampledSince on
// lacks the sampled mark, that is, was written by a build that records
// only changes (an older one, served on this directory after this build).
// A record it cannot decode is skipped: the series reports it when read,
// and the statistics must open all the same.
func olderRecordSince(txn *badger.Txn, sampledSince int64) bool {
	if sampledSince == 0 {
		return false
	}
	it := txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	p := []byte(pGMinute)
	for it.Seek(bucketKey(pGMinute, sampledSince/60, "", "")); it.ValidForPrefix(p); it.Next() {
		var g Global
		if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &g) }); err != nil {
			continue
		}
		if !g.Sampled {
			return true
		}
	}
	return false
}

// relabelled logs that a persisted record now counts under another label.
func (s *Stats) relabelled(what, from, to string) {
	s.cfg.Logger.Warn("stats: persisted "+what+" relabelled (not valid, beyond its cap, or a namespace with only misses)", "from", from, "to", to)
}

// loadTotals admits the namespaces and backends of the persisted totals,
// busiest first so that caps keep the busiest, and relabels the rest. A
// namespace is admitted only if it was admitted before (admitted) or has
// writes or hits: one with only misses is what a reader's lookups created
// before lookups stopped admitting namespaces (issue 12, bug 9), and is
// folded into Other. Likewise a valid backend is admitted only if it was
// admitted before (admittedBackends: a plugin's, a stored entry's) or has
// writes or hits: one with only misses is a reader's X-Cachesvc-Backend
// from before misses stopped admitting backends, made up or not, and is
// folded into Other (with one log line), as such backends, busier than
// the real ones, took every slot again at each start.
func (s *Stats) loadTotals(totals map[nsBackend]Counters, admitted, admittedBackends map[string]bool) {
	a := &s.agg
	busy := map[string]int64{}
	held := map[string]bool{}   // namespaces admitted or with writes or hits
	heldBE := map[string]bool{} // backends likewise
	for nb, c := range totals {
		busy[nb.ns] = satAdd(busy[nb.ns], satAdd(c.Lookups, c.Writes))
		held[nb.ns] = held[nb.ns] || admitted[nb.ns] || c.Writes > 0 || c.Hits > 0
		heldBE[nb.backend] = heldBE[nb.backend] || admittedBackends[nb.backend] || c.Writes > 0 || c.Hits > 0 ||
			nb.backend == Other || nb.backend == UnknownBackend || !validBackend(nb.backend)
	}
	var folded []string // backends with only misses, never admitted
	keys := make([]nsBackend, 0, len(totals))
	for nb := range totals {
		keys = append(keys, nb)
	}
	slices.SortFunc(keys, func(x, y nsBackend) int {
		if c := cmp.Compare(busy[y.ns], busy[x.ns]); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(x.ns, y.ns), strings.Compare(x.backend, y.backend))
	})
	for _, nb := range keys {
		c := totals[nb]
		reset := c.clampNegative()
		if reset {
			s.cfg.Logger.Warn("stats: negative counters on disk reset to 0 (written before sums saturated)", "namespace", nb.ns, "backend", nb.backend)
		}
		to := nsBackend{Other, Other}
		if heldBE[nb.backend] {
			to.backend = s.backends.admit(nb.backend)
		} else if !slices.Contains(folded, nb.backend) {
			folded = append(folded, nb.backend)
		}
		if held[nb.ns] {
			to.ns = s.namespaces.admit(nb.ns)
		}
		if t := a.totals[to]; t != nil {
			t.add(&c)
		} else {
			a.totals[to] = &c
		}
		if to != nb {
			if heldBE[nb.backend] { // the folded backends get one line below
				s.relabelled("totals", nb.ns+"/"+nb.backend, to.ns+"/"+to.backend)
			}
			a.dead.totals = append(a.dead.totals, nb)
			a.dirtyTotals[to] = true
		} else if reset {
			a.dirtyTotals[to] = true
		}
	}
	// Admitted namespaces without totals yet (configured, no traffic) come
	// after those with traffic; marks beyond the cap are dropped.
	quiet := make([]string, 0, len(admitted))
	for ns := range admitted {
		if _, ok := busy[ns]; !ok {
			quiet = append(quiet, ns)
		}
	}
	sort.Strings(quiet)
	for _, ns := range quiet {
		s.namespaces.admit(ns)
	}
	for ns := range admitted {
		if s.namespaces.labelOf(ns) != ns {
			a.dead.admitted = append(a.dead.admitted, ns)
		}
	}
	s.loadBackendMarks(admittedBackends)
	if len(folded) > 0 {
		sort.Strings(folded)
		shown := make([]string, 0, min(len(folded), maxFoldedShown))
		for _, be := range folded[:cap(shown)] {
			shown = append(shown, wire.Echo(be)) // a reader's header: maybe a pasted secret
		}
		s.cfg.Logger.Warn("stats: persisted backends with only misses, never admitted, now counted under "+Other+
			" (X-Cachesvc-Backend values readers sent before misses stopped admitting backends; they took backend slots)",
			"backends", len(folded), "names", strings.Join(shown, ", "))
	}
}

// maxFoldedShown bounds the backend names the fold's log line quotes.
const maxFoldedShown = 20

// loadBackendMarks admits the backends admitted before that have no totals
// yet (a plugin's, no traffic) after those with traffic, and drops the
// marks beyond the cap.
func (s *Stats) loadBackendMarks(marks map[string]bool) {
	quiet := make([]string, 0, len(marks))
	for be := range marks {
		quiet = append(quiet, be)
	}
	sort.Strings(quiet)
	for _, be := range quiet {
		if validBackend(be) {
			s.backends.admit(be)
		}
		if s.backends.labelOf(be) != be {
			s.agg.dead.admittedBackends = append(s.agg.dead.admittedBackends, be)
		}
	}
}

// loadRuns admits the persisted runs; a run id that is not valid is merged
// into the run Other, and each run's namespaces are relabelled as their
// totals were. The MaxRuns most recently seen runs get slots, as the run
// table keeps them while serving (more are on disk only when MaxRuns was
// lowered, or a crash lost the deletions of evicted runs): the rest are
// merged into Other too. Each slot is last seen when its run was and
// keeps its admission number (Run.Seq), so eviction order, ties in the
// same second included, is the same after a restart. A run idle for
// longer than RunTTL at load folds into Other at once, as collect folds it
// while serving: otherwise it held its slot until the first collect, and a
// new run admitted before then into a full table evicted a run in use.
func (s *Stats) loadRuns(runs []Run) {
	a := &s.agg
	// Most recently seen first, as the run table orders slots: by the
	// second (runSlot.last), then the later admitted; the rest only
	// orders records written before Run.Seq.
	slices.SortFunc(runs, func(x, y Run) int {
		return cmp.Or(cmp.Compare(y.LastSeen.Unix(), x.LastSeen.Unix()), cmp.Compare(y.Seq, x.Seq),
			y.LastSeen.Compare(x.LastSeen), strings.Compare(x.Run, y.Run))
	})
	idle := func(r *Run) bool { return a.started.Sub(r.LastSeen) > s.cfg.RunTTL }
	keep := make(map[string]bool, min(len(runs), s.cfg.MaxRuns))
	for _, r := range runs {
		if len(keep) < s.cfg.MaxRuns && r.Run != Other && validRun(r.Run) && !idle(&r) {
			keep[r.Run] = true
		}
	}
	// Oldest first, so that a record without a Seq is numbered after the
	// runs seen before it.
	for _, r := range slices.Backward(runs) {
		from := r.Run
		if r.Counters.clampNegative() {
			s.cfg.Logger.Warn("stats: negative counters on disk reset to 0 (written before sums saturated)", "run", r.Run, "namespaces", r.Namespaces)
		}
		nss := make([]string, 0, len(r.Namespaces))
		for _, ns := range r.Namespaces {
			if l := s.namespaces.labelOf(ns); !contains(nss, l) && len(nss) < maxRunNamespaces {
				nss = append(nss, l)
			}
		}
		sort.Strings(nss)
		r.Namespaces = nss
		r.slot = s.runs.other
		if keep[from] {
			ns := ""
			if len(nss) > 0 {
				ns = nss[0]
			}
			r.slot = s.runs.readmit(from, ns, r.LastSeen.Unix(), r.Seq)
		}
		r.Seq = r.slot.seq // 0 for Other
		r.Run = r.slot.name
		if r.Run != from {
			if !idle(&r) || !validRun(from) {
				s.relabelled("run", from, r.Run)
			}
			a.dead.runs = append(a.dead.runs, from)
		}
		if cur := a.runs[r.Run]; cur != nil {
			mergeRun(cur, &r)
		} else {
			a.runs[r.Run] = &r
		}
		// Rewritten at the next flush even when unchanged (a clamped or
		// relabelled one must be): builds before idle runs folded into
		// Other wrote runs with a TTL, which drops a run idle for RunTTL
		// while the server is down, and Other once idle.
		a.dirtyRuns[r.Run] = true
	}
}

// mergeRun adds what o did to r.
func mergeRun(r, o *Run) {
	if o.FirstSeen.Before(r.FirstSeen) {
		r.FirstSeen = o.FirstSeen
	}
	if o.LastSeen.After(r.LastSeen) {
		r.LastSeen = o.LastSeen
	}
	r.FirstHit = earliest(r.FirstHit, o.FirstHit)
	for _, ns := range o.Namespaces {
		if !contains(r.Namespaces, ns) && len(r.Namespaces) < maxRunNamespaces {
			r.Namespaces = append(r.Namespaces, ns)
		}
	}
	sort.Strings(r.Namespaces)
	r.Counters.add(&o.Counters)
}

// loadEntry keeps one persisted top entry, relabelled as its totals were.
func (s *Stats) loadEntry(key [32]byte, e Entry) {
	a := &s.agg
	from := entryKey{e.Namespace, key}
	orig := e
	if e.SavedMicros < 0 || e.Hits < 0 {
		s.cfg.Logger.Warn("stats: negative compile seconds saved on disk reset to 0 (written before sums saturated)", "namespace", e.Namespace, "backend", e.Backend, "key", e.Key)
		e.SavedMicros, e.Hits = max(e.SavedMicros, 0), max(e.Hits, 0)
	}
	e.CompileSeconds = wire.ClampCompileSeconds(e.CompileSeconds)
	e.Namespace = s.namespaces.labelOf(e.Namespace)
	e.Backend = s.backends.labelOf(e.Backend)
	e.Name = wire.SanitizeName(e.Name)
	to := entryKey{e.Namespace, key}
	if to != from {
		a.dead.entries = append(a.dead.entries, from)
	}
	if cur := a.entries[to]; cur != nil {
		cur.Hits = satAdd(cur.Hits, e.Hits)
		cur.SavedMicros = satAdd(cur.SavedMicros, e.SavedMicros)
		if e.LastHit.After(cur.LastHit) {
			cur.LastHit = e.LastHit
		}
		a.dirtyEntries[to] = true
		return
	}
	a.entries[to] = &e
	if e != orig {
		a.dirtyEntries[to] = true
	}
}

// loadMisses keeps the persisted recent misses and reason counts,
// relabelled as their namespaces' totals were; misses of namespaces merged
// into one are kept in time order.
func (s *Stats) loadMisses(misses map[string]persistedMisses) {
	a := &s.agg
	type merged struct {
		recent  []Miss
		reasons map[string]int64
		dirty   bool
	}
	into := map[string]*merged{}
	for ns, pm := range misses {
		to := s.namespaces.labelOf(ns)
		m := into[to]
		if m == nil {
			m = &merged{reasons: map[string]int64{}}
			into[to] = m
		}
		if to != ns {
			s.relabelled("misses", ns, to)
			a.dead.misses = append(a.dead.misses, ns)
			m.dirty = true
		}
		for _, ms := range pm.Recent {
			clean := sanitizeMiss(ms)
			m.dirty = m.dirty || !reflect.DeepEqual(clean, ms)
			m.recent = append(m.recent, clean)
		}
		for r, n := range pm.Reasons {
			l := reasonLabel(r)
			if _, ok := m.reasons[l]; !ok && len(m.reasons) >= maxReasonsPerNamespace {
				l = Other
			}
			m.dirty = m.dirty || l != r || n < 0
			m.reasons[l] = satAdd(m.reasons[l], max(n, 0))
		}
	}
	for ns, m := range into {
		slices.SortStableFunc(m.recent, func(x, y Miss) int { return x.Time.Compare(y.Time) })
		r := &missRing{}
		for _, ms := range m.recent {
			r.push(ms, s.cfg.MissesPerNamespace)
		}
		a.misses[ns] = r
		a.reasons[ns] = m.reasons
		if m.dirty {
			a.dirtyMisses[ns] = true
		}
	}
}
