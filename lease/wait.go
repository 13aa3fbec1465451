package lease

import (
	"context"
	"fmt"

	"github.com/cachesvc/cachesvc/cachekey"
)

// Waiter is a parked reader of one slot. C is closed when the slot's outcome
// is known; Outcome then says which.
type Waiter struct {
	id      slotID
	c       chan struct{}
	outcome Outcome // guarded by Table.mu until c is closed
}

// C returns a channel that is closed when the waiter is woken.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Outcome returns why the waiter was woken; it is Pending before C closes.
func (w *Waiter) Outcome() Outcome {
	select {
	case <-w.c:
		return w.outcome
	default:
		return Pending
	}
}

// Wait parks a waiter behind the live lease on (ns, key). When there is no
// live lease it returns ok=false and no waiter. The caller must call Cancel
// on the waiter unless it was woken.
//
// With Config.Shared a lease this table does not know is looked up in the
// backend, so a waiter can park behind a compile that another replica
// granted; the table's poll (every PollInterval) wakes it with Released
// when that lease vanishes. The caller should still check the store about
// every second while parked (an entry written on another replica wakes no
// local waiter directly) and call Holder when l.Expires passes. When the
// backend cannot be reached Wait answers from the local table alone.
//
// Callers must re-check the store after Wait returns ok: an entry written
// just before the waiter was parked does not wake it.
//
// # Errors
//   - ErrTooManyWaiters when MaxWaiters waiters are already parked.
func (t *Table) Wait(ctx context.Context, ns string, key cachekey.Key) (w *Waiter, l Lease, ok bool, err error) {
	id := slotID{ns, key}
	t.mu.Lock()
	s := t.slots[id]
	known := s != nil && s.holder != "" && t.now().Before(s.expires)
	if t.closed || (!known && t.shared == nil) {
		t.mu.Unlock()
		return nil, Lease{}, false, nil
	}
	if known {
		defer t.mu.Unlock()
		return t.parkLocked(id, s)
	}
	t.mu.Unlock()
	v, held, err := t.refresh(ctx, id)
	if err != nil || !held {
		return nil, Lease{}, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, Lease{}, false, nil
	}
	s = t.slots[id]
	if s == nil || s.holder == "" || !t.now().Before(s.expires) {
		if t.waiters >= t.maxWaiters && !t.displaceWaiterLocked(id.ns) { // before creating a slot no one would clean up
			return nil, Lease{}, false, fmt.Errorf("%w: %d waiters parked (the limit)", ErrTooManyWaiters, t.waiters)
		}
		t.setLocked(id, v, true) // a copy of another replica's lease, for its waiters
		s = t.slots[id]
	}
	return t.parkLocked(id, s)
}

// parkLocked adds a waiter to the live slot s.
func (t *Table) parkLocked(id slotID, s *slot) (*Waiter, Lease, bool, error) {
	if t.waiters >= t.maxWaiters && !t.displaceWaiterLocked(id.ns) {
		return nil, Lease{}, false, fmt.Errorf("%w: %d waiters parked (the limit; namespace %q parks %d)", ErrTooManyWaiters, t.waiters, id.ns, t.waitersNS[id.ns])
	}
	w := &Waiter{id: id, c: make(chan struct{})}
	if s.waiters == nil {
		s.waiters = make(map[*Waiter]struct{})
	}
	s.waiters[w] = struct{}{}
	t.waiters++
	t.waitersNS[id.ns]++
	return w, Lease{Holder: s.holder, Expires: s.expires, Local: s.local}, true, nil
}

// Cancel unparks w if it is still parked. It is safe to call more than once
// and after w was woken.
func (t *Table) Cancel(w *Waiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[w.id]
	if s == nil {
		return
	}
	if _, ok := s.waiters[w]; !ok {
		return
	}
	t.unparkLocked(w.id, s, w)
}

// unparkLocked removes w from slot s (at id), and the slot when it was a
// remote copy kept only for its waiters.
func (t *Table) unparkLocked(id slotID, s *slot, w *Waiter) {
	delete(s.waiters, w)
	t.waiters--
	t.decLocked(t.waitersNS, id.ns, 1)
	if (s.holder == "" || s.remote) && len(s.waiters) == 0 {
		delete(t.slots, id) // a remote copy is kept only for its waiters
	}
}
