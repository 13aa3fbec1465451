package store

import (
	"context"
	"fmt"
	"sync"
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
// sync serves as soon as the running one ends. Nothing waits to fill a batch:
// a lone writer's sync starts at once.
//
// Bounds: at most two batches exist, the one being synced and the one
// gathering; a batch is one channel shared by all its waiters, so memory
// does not grow with the number of waiters (they are the Puts in flight,
// which the server bounds).
type groupSync struct {
	kick chan struct{} // capacity 1: a batch is gathering

	mu        sync.Mutex
	sync      func() error // read under mu, so tests can replace it
	gathering *syncBatch   // waiters for the next sync; nil when none
	closed    bool
	done      chan struct{} // closed when run returns
}

// syncBatch is the waiters one sync serves: done is closed once err is set.
type syncBatch struct {
	done    chan struct{}
	err     error
	waiters int
}

// newGroupSync returns a syncer running fn for its syncs. The caller starts
// run on a goroutine of its own.
func newGroupSync(fn func() error) *groupSync {
	return &groupSync{sync: fn, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// wait blocks until a sync that started after wait was called has finished
// and returns its error, or ctx's error if ctx ends first (the sync still
// runs for the others), or ErrClosed if the syncer is closed before such a
// sync starts.
func (g *groupSync) wait(ctx context.Context) error {
	g.mu.Lock()
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
	select {
	case g.kick <- struct{}{}:
	default: // run has been kicked already and will take this batch
	}
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
		g.mu.Lock()
		b, sync := g.gathering, g.sync
		g.gathering = nil
		g.mu.Unlock()
		if b == nil {
			continue // a kick for a batch an earlier sync took
		}
		// Every waiter of b registered before this point, so this sync,
		// which starts after it, covers them all.
		b.err = sync()
		close(b.done)
	}
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
// concurrent callers.
func (s *Badger) syncWait(ctx context.Context) error {
	if s.syncer == nil {
		return nil
	}
	if err := s.syncer.wait(ctx); err != nil {
		return fmt.Errorf("sync to disk: %w", err)
	}
	return nil
}
