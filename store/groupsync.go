package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// groupSync shares fsyncs among concurrent writers (group commit). With
// Config.SyncWrites every Put must have its writes on disk before it
// answers; an fsync of the value log and write-ahead log covers everything
// committed before it starts, so writers that need one at about the same
// time can share it instead of each running their own.
//
// A writer whose writes are committed to Badger calls wait, which returns
// once a sync that started after the call has finished, with that sync's
// error. One sync runs at a time, on the syncer's own goroutine (run);
// writers arriving while it runs gather into the next batch, which the next
// sync serves as soon as the running one ends. A lone writer's sync starts
// at once; only writers announced as about to join are waited for (below).
//
// Bounds: at most two batches exist, the one being synced and the one
// gathering; a batch is one channel shared by all its waiters, so memory
// does not grow with the number of waiters (they are the Puts in flight,
// which the server bounds).
//
// A sync that starts while another writer is about to wait only serves
// that writer with the sync after it, and under concurrent writers every
// sync costs the CPU its fsyncs take (on a virtual disk, most of a PUT's).
// So writers announce themselves (expect) just before their last commit,
// and the syncer, before it starts a sync, waits for announced writers to
// join the batch: until none is left, but never longer than half the last
// sync took (at most maxGatherDelay). A writer alone is never announced
// while the batch gathers, so its sync still starts at once; the delay is
// bounded by what one more sync would have cost the waiters anyway.
type groupSync struct {
	kick chan struct{} // capacity 1: a batch is gathering

	mu        sync.Mutex
	sync      func() error // read under mu, so tests can replace it
	gathering *syncBatch   // waiters for the next sync; nil when none
	closed    bool
	done      chan struct{} // closed when run returns

	// expected counts writers between expect and the wait that consumes
	// it (or unexpect): writers about to join a batch.
	expected atomic.Int64
	// lastSync is how long the last sync took (a time.Duration).
	lastSync atomic.Int64
	// maxDelay bounds the wait for announced writers: maxGatherDelay
	// (tests raise it, so that no scheduling delay can end a wait early).
	maxDelay time.Duration
}

// maxGatherDelay bounds how long a sync waits for announced writers.
const maxGatherDelay = time.Millisecond

// syncBatch is the waiters one sync serves: done is closed once err is set.
type syncBatch struct {
	done    chan struct{}
	err     error
	waiters int
}

// newGroupSync returns a syncer running fn for its syncs. The caller starts
// run on a goroutine of its own.
func newGroupSync(fn func() error) *groupSync {
	return &groupSync{sync: fn, kick: make(chan struct{}, 1), done: make(chan struct{}), maxDelay: maxGatherDelay}
}

// expect announces a writer that will call wait(ctx, true) soon (or
// unexpect, if it fails first).
func (g *groupSync) expect() { g.expected.Add(1) }

// unexpect withdraws an expect whose wait will not come, and wakes a
// syncer that may be waiting for it.
func (g *groupSync) unexpect() {
	g.expected.Add(-1)
	g.poke()
}

// poke wakes run without blocking: a kick already pending will do.
func (g *groupSync) poke() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// wait blocks until a sync that started after wait was called has finished
// and returns its error, or ctx's error if ctx ends first (the sync still
// runs for the others), or ErrClosed if the syncer is closed before such a
// sync starts. expected says the caller announced itself with expect; the
// wait consumes that.
func (g *groupSync) wait(ctx context.Context, expected bool) error {
	g.mu.Lock()
	if expected {
		g.expected.Add(-1) // under mu: joined the batch the syncer will take
	}
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	b := g.gathering
	if b == nil {
		b = &syncBatch{done: make(chan struct{})}
		g.gathering = b
	}
	b.waiters++
	g.mu.Unlock()
	g.poke() // run takes this batch when it next looks
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run serves batches, one sync each, until stop is closed; then it fails
// the gathering batch with ErrClosed (a sync in progress finishes first and
// delivers its own result).
func (g *groupSync) run(stop <-chan struct{}) {
	defer close(g.done)
	for {
		select {
		case <-stop:
			g.close()
			return
		case <-g.kick:
		}
		select { // stop wins over a kick that came with it
		case <-stop:
			g.close()
			return
		default:
		}
		if !g.gather(stop) {
			g.close()
			return
		}
		g.mu.Lock()
		b, sync := g.gathering, g.sync
		g.gathering = nil
		g.mu.Unlock()
		if b == nil {
			continue // a kick for a batch an earlier sync took
		}
		// Every waiter of b registered before this point, so this sync,
		// which starts after it, covers them all.
		start := time.Now()
		b.err = sync()
		g.lastSync.Store(int64(time.Since(start)))
		close(b.done)
	}
}

// gather waits, before a sync, for announced writers to join the
// gathering batch: until none is expected, or half the last sync's
// duration (at most maxDelay) has passed; each joining or withdrawing
// writer kicks. It returns false if stop closed meanwhile.
func (g *groupSync) gather(stop <-chan struct{}) bool {
	if g.expected.Load() <= 0 {
		return true
	}
	d := min(time.Duration(g.lastSync.Load())/2, g.maxDelay)
	if d <= 0 {
		return true
	}
	deadline := time.Now().Add(d)
	t := time.NewTimer(d)
	defer t.Stop()
	for g.expected.Load() > 0 {
		if time.Until(deadline) <= 0 {
			return true
		}
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		case <-g.kick:
		}
	}
	return true
}

// close stops new waits and fails the gathering batch with ErrClosed.
func (g *groupSync) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if b := g.gathering; b != nil {
		g.gathering = nil
		b.err = ErrClosed
		close(b.done)
	}
}

// gatheringWaiters returns how many waiters the next sync will serve (for
// tests).
func (g *groupSync) gatheringWaiters() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gathering == nil {
		return 0
	}
	return g.gathering.waiters
}

// syncWait returns once everything the caller has committed to Badger is on
// disk, under Config.SyncWrites (at once without it), sharing the fsync with
// concurrent callers. expected says the caller announced itself with
// expectSync.
func (s *Badger) syncWait(ctx context.Context, expected bool) error {
	if s.syncer == nil {
		return nil
	}
	if err := s.syncer.wait(ctx, expected); err != nil {
		return fmt.Errorf("sync to disk: %w", err)
	}
	return nil
}

// expectSync announces that the caller will call syncWait(ctx, true) soon
// (see groupSync); it returns whether it did (only under SyncWrites).
func (s *Badger) expectSync() bool {
	if s.syncer == nil {
		return false
	}
	s.syncer.expect()
	return true
}
