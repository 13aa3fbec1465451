package stats

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runTable holds the run slots: up to max run ids counted under their own
// name. A run id gets a slot the first time a request carries it; when the
// table is full the new run takes the slot of the least recently seen run
// of the namespace holding the most slots (ties: the one whose least
// recently seen run is older), as run manifests bound themselves
// (manifest.Recorder): a busy CI or a namespace flooding run ids evicts its
// own old runs, never another team's, and the runs in use are always
// tracked. Before, the first max run ids kept their slots for 30 idle days
// and every later run counted under Other, before and after a restart.
//
// An evicted slot is marked gone; the next collect folds its counts (the
// aggregate's record and any delta recorded before the eviction) into the
// run Other, so the runs still sum to every lookup that carried a run. A
// run idle for RunTTL leaves the same way (collect frees its slot and
// folds it; load folds one already idle at start, holding no slot).
//
// Slots are read lock-free (sync.Map); admissions and evictions take mu.
type runTable struct {
	known sync.Map // run id → *runSlot, the slots in use
	mu    sync.Mutex
	max   int
	slots map[string]*runSlot // guarded by mu; what known holds
	lru   runLRU              // guarded by mu; the slots in eviction order
	seq   uint64              // guarded by mu; admissions so far
	// evictions counts the slots taken from a run for a new one (not
	// those freed after RunTTL idle), all time: load restores the
	// persisted count, as the slots.
	evictions atomic.Int64
	// lastRun and lastNS name the last run evicted, for the log; guarded
	// by mu.
	lastRun, lastNS string
	other           *runSlot // the run Other: never in slots, never evicted
}

// runSlot is one run's slot. Records are keyed by the slot, not the name,
// so that counts recorded before an eviction never land in a later slot of
// the same run id.
type runSlot struct {
	name string
	// last is when a request last carried the run (Unix seconds).
	last atomic.Int64
	// gone is set when the slot is evicted or forgotten.
	gone atomic.Bool
	// ns is the namespace the run counts in for eviction: the first of
	// its namespaces, in order (its record's Namespaces[0]), as it is
	// after a restart; guarded by runTable.mu.
	ns string
	// seq orders slots last seen in the same second: the earlier
	// admitted is evicted first. Set before the slot is published and
	// never changed; persisted as Run.Seq.
	seq uint64
	// key and idx place the slot in runTable.lru (see runLRU); guarded by
	// runTable.mu.
	key int64
	idx int
}

func newRunTable(max int) *runTable {
	return &runTable{max: max, slots: make(map[string]*runSlot), lru: newRunLRU(), other: &runSlot{name: Other}}
}

// slot returns run's slot, noting that it was seen at now (Unix seconds),
// or admits run when it has none: a run id that is not valid counts under
// Other. ns is the namespace label of the request, where a new run counts.
func (t *runTable) slot(run, ns string, now int64) *runSlot {
	if v, ok := t.known.Load(run); ok {
		sl := v.(*runSlot)
		if sl.last.Load() < now { // one store a second: the line is shared
			sl.last.Store(now)
		}
		return sl
	}
	if run == Other || !validRun(run) {
		return t.other
	}
	return t.admit(run, ns, now)
}

// admit gives run (valid) a slot, evicting one when the table is full.
func (t *runTable) admit(run, ns string, now int64) *runSlot {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sl := t.slots[run]; sl != nil {
		return sl
	}
	if t.max <= 0 {
		return t.other
	}
	if len(t.slots) >= t.max {
		t.evictLocked()
	}
	t.seq++
	return t.addLocked(run, ns, now, t.seq)
}

// readmit gives run (valid) a slot at load, admitted as number seq (its
// Run.Seq; 0, from a record written before it, takes the next number),
// unless the table is full: then it returns Other. Later admissions are
// numbered after every seq readmitted, so that the order of runs last seen
// in the same second survives a restart.
func (t *runTable) readmit(run, ns string, last int64, seq uint64) *runSlot {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sl := t.slots[run]; sl != nil {
		return sl
	}
	if t.max <= 0 || len(t.slots) >= t.max {
		return t.other
	}
	if seq == 0 {
		seq = t.seq + 1
	}
	t.seq = max(t.seq, seq)
	return t.addLocked(run, ns, last, seq)
}

// addLocked makes run's slot, admitted as number seq, last seen at last.
func (t *runTable) addLocked(run, ns string, last int64, seq uint64) *runSlot {
	sl := &runSlot{name: strings.Clone(run), ns: ns, seq: seq}
	sl.last.Store(last)
	t.slots[sl.name] = sl
	t.lru.add(sl)
	t.known.Store(sl.name, sl)
	return sl
}

// evictLocked frees the slot of the least recently seen run of the
// namespace holding the most slots.
func (t *runTable) evictLocked() {
	v := t.lru.victim()
	if v == nil {
		return
	}
	t.dropLocked(v)
	t.lastRun, t.lastNS = v.name, v.ns
	t.evictions.Add(1)
}

// lastEvicted names the last run evicted and its namespace.
func (t *runTable) lastEvicted() (run, ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastRun, t.lastNS
}

// dropLocked frees sl's slot, which is in the table.
func (t *runTable) dropLocked(sl *runSlot) {
	sl.gone.Store(true)
	t.lru.remove(sl)
	delete(t.slots, sl.name)
	t.known.Delete(sl.name)
}

// forget frees sl's slot (the run was idle for RunTTL), unless it is gone
// already.
func (t *runTable) forget(sl *runSlot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots[sl.name] == sl {
		t.dropLocked(sl)
	}
}

// setNamespace makes ns the namespace sl counts in for eviction.
func (t *runTable) setNamespace(sl *runSlot, ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots[sl.name] != sl { // gone: no longer in the eviction order
		sl.ns = ns
		return
	}
	t.lru.remove(sl)
	sl.ns = ns
	t.lru.add(sl)
}

// len returns the number of slots in use.
func (t *runTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.slots)
}

// runEvictionLogEvery bounds the log lines about evicted runs.
const runEvictionLogEvery = time.Minute

// runEvictionLog is when collect last logged evictions, and how many there
// had been. Guarded by aggregate.mu.
type runEvictionLog struct {
	logged    time.Time
	evictions int64
}

// foldRun moves run record r out of the aggregate and into the run Other,
// so that its counts stay in the runs' sum, and deletes its persisted
// record. Evicted runs (their slot taken by a new run) and runs idle for
// RunTTL both come here. Called with a.mu held.
func (s *Stats) foldRun(r *Run) {
	a := &s.agg
	delete(a.runs, r.Run)
	delete(a.dirtyRuns, r.Run)
	a.dead.runs = append(a.dead.runs, r.Run)
	o := a.runs[Other]
	if o == nil {
		o = &Run{Run: Other, FirstSeen: r.FirstSeen, slot: s.runs.other}
		a.runs[Other] = o
	}
	mergeRun(o, r)
	a.dirtyRuns[Other] = true
}

// takeRunLog returns the log line's fields when runs were evicted since
// the last line and that is at least runEvictionLogEvery old. Called with
// a.mu held.
func (s *Stats) takeRunLog(now time.Time) []any {
	l := &s.agg.runLog
	n := s.runs.evictions.Load()
	if n == l.evictions || now.Sub(l.logged) < runEvictionLogEvery {
		return nil
	}
	run, ns := s.runs.lastEvicted()
	args := []any{"max_runs", s.cfg.MaxRuns, "evicted", n - l.evictions, "namespace", ns, "run", run}
	l.evictions, l.logged = n, now
	return args
}

// RunEvictions returns how many runs lost their slot to a new run: each
// time the run table was full (Config.MaxRuns) and a new run id came, the
// least recently seen run of the namespace holding the most runs was
// folded into Other. It is persisted with the run table (as of the last
// flush: a crash may lose the latest), so it counts across restarts, as
// the statistics' other counters do; runs idle for RunTTL, folded too, are
// not counted.
func (s *Stats) RunEvictions() int64 { return s.runs.evictions.Load() }

// Runs returns the number of run ids tracked under their own name, at
// most Config.MaxRuns.
func (s *Stats) Runs() int { return s.runs.len() }
