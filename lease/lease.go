// Package lease keeps the in-memory table of compile leases and the waiters
// parked behind them.
//
// A lease says "holder H is compiling (namespace, key) until time E". The
// first caller to Acquire a free or expired slot gets it; others learn who
// holds it and may Wait for the outcome. The table is bounded (leases and
// waiters), holds no goroutines or timers and does no I/O: the HTTP layer
// owns the clock-driven parts (it re-checks Holder when a lease's expiry
// passes). A restart forgets every lease, which is safe: waiters then time
// out or get a 404 and compile themselves.
package lease

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

// Sentinel errors returned by Table methods.
var (
	// ErrTableFull means the table already holds its maximum number of live
	// leases; the caller should compile without a lease.
	ErrTableFull = errors.New("lease table is full")
	// ErrTooManyWaiters means the table already parks its maximum number of
	// waiters.
	ErrTooManyWaiters = errors.New("too many waiters")
	// ErrNotHeld means no live lease exists for the slot.
	ErrNotHeld = errors.New("no lease is held")
	// ErrHeldByOther means the lease is held by a different holder.
	ErrHeldByOther = errors.New("lease is held by another holder")
	// ErrInvalidHolder means the holder name is empty or too long.
	ErrInvalidHolder = errors.New("invalid holder")
)

// Defaults used when a Config field is zero.
const (
	DefaultMaxLeases  = 100_000
	DefaultMaxWaiters = 10_000
	MaxHolderLen      = 256
)

// Config configures a Table. The zero value means defaults.
type Config struct {
	// MaxLeases bounds live leases (DefaultMaxLeases when 0).
	MaxLeases int
	// MaxWaiters bounds parked waiters across all slots (DefaultMaxWaiters when 0).
	MaxWaiters int
	// Now returns the current time (time.Now when nil); tests substitute it.
	Now func() time.Time
}

// Lease is a snapshot of one lease.
type Lease struct {
	Holder  string
	Expires time.Time
}

// Outcome says why a waiter was woken.
type Outcome int

// Outcomes delivered to waiters.
const (
	// Pending means the waiter has not been woken yet.
	Pending Outcome = iota
	// Written means the entry was stored; the waiter should read it.
	Written
	// Released means the holder released the lease without writing.
	Released
	// Expired means the lease expired and was swept from the table.
	Expired
	// Closed means the table was closed (the server is shutting down).
	Closed
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Written:
		return "written"
	case Released:
		return "released"
	case Expired:
		return "expired"
	case Closed:
		return "closed"
	default:
		return "pending"
	}
}

type slotID struct {
	ns  string
	key cachekey.Key
}

type slot struct {
	holder  string
	expires time.Time
	waiters map[*Waiter]struct{}
}

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

// Table is the lease table. It is safe for concurrent use.
type Table struct {
	mu         sync.Mutex
	slots      map[slotID]*slot
	live       int // slots with a holder (possibly expired, not yet swept)
	waiters    int
	maxLeases  int
	maxWaiters int
	now        func() time.Time
	closed     bool
}

// New returns an empty table.
func New(cfg Config) *Table {
	t := &Table{
		slots:      make(map[slotID]*slot),
		maxLeases:  cfg.MaxLeases,
		maxWaiters: cfg.MaxWaiters,
		now:        cfg.Now,
	}
	if t.maxLeases <= 0 {
		t.maxLeases = DefaultMaxLeases
	}
	if t.maxWaiters <= 0 {
		t.maxWaiters = DefaultMaxWaiters
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// ValidateHolder checks a holder name: 1 to MaxHolderLen bytes.
func ValidateHolder(h string) error {
	if h == "" || len(h) > MaxHolderLen {
		return fmt.Errorf("%w: holder must be 1 to %d bytes, got %d", ErrInvalidHolder, MaxHolderLen, len(h))
	}
	return nil
}

// Acquire grants the lease on (ns, key) to holder for ttl when the slot is
// free, expired, or already held by the same holder (a renewal). It returns
// the lease now in force and whether holder owns it. When another holder owns
// a live lease, granted is false and err is nil.
//
// # Errors
//   - ErrInvalidHolder for an empty or overlong holder.
//   - ErrTableFull when a new lease would exceed MaxLeases even after
//     sweeping expired leases.
func (t *Table) Acquire(ns string, key cachekey.Key, holder string, ttl time.Duration) (l Lease, granted bool, err error) {
	if err := ValidateHolder(holder); err != nil {
		return Lease{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	id := slotID{ns, key}
	s := t.slots[id]
	if s != nil && s.holder != "" && s.holder != holder && now.Before(s.expires) {
		return Lease{Holder: s.holder, Expires: s.expires}, false, nil
	}
	if s == nil || s.holder == "" {
		if t.live >= t.maxLeases {
			t.sweepLocked(now)
		}
		if t.live >= t.maxLeases {
			return Lease{}, false, fmt.Errorf("%w: %d live leases (the limit)", ErrTableFull, t.live)
		}
		if s == nil {
			s = &slot{}
			t.slots[id] = s
		}
		t.live++
	}
	// Waiters parked behind an expired lease keep waiting for the new holder.
	s.holder = holder
	s.expires = now.Add(ttl)
	return Lease{Holder: holder, Expires: s.expires}, true, nil
}

// Holder returns the live lease on (ns, key), if any. An expired lease is
// reported as absent.
func (t *Table) Holder(ns string, key cachekey.Key) (Lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[slotID{ns, key}]
	if s == nil || s.holder == "" || !t.now().Before(s.expires) {
		return Lease{}, false
	}
	return Lease{Holder: s.holder, Expires: s.expires}, true
}

// Release ends holder's lease on (ns, key) without an entry; waiters are woken
// with Released.
//
// # Errors
//   - ErrNotHeld when no live lease exists.
//   - ErrHeldByOther (wrapped with the current holder) when someone else holds it.
func (t *Table) Release(ns string, key cachekey.Key, holder string) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := slotID{ns, key}
	s := t.slots[id]
	if s == nil || s.holder == "" || !t.now().Before(s.expires) {
		return Lease{}, ErrNotHeld
	}
	cur := Lease{Holder: s.holder, Expires: s.expires}
	if s.holder != holder {
		return cur, fmt.Errorf("%w: held by %q", ErrHeldByOther, s.holder)
	}
	t.endLocked(id, s, Released)
	return cur, nil
}

// Written records that the entry (ns, key) was stored: the lease, whoever
// holds it, ends and every waiter is woken with Written. It is a cheap no-op
// when the slot is unknown.
func (t *Table) Written(ns string, key cachekey.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := slotID{ns, key}
	if s := t.slots[id]; s != nil {
		t.endLocked(id, s, Written)
	}
}

// Wait parks a waiter behind the live lease on (ns, key). When there is no
// live lease it returns ok=false and no waiter. The caller must call Cancel
// on the waiter unless it was woken.
//
// Callers must re-check the store after Wait returns ok: an entry written
// just before the waiter was parked does not wake it.
//
// # Errors
//   - ErrTooManyWaiters when MaxWaiters waiters are already parked.
func (t *Table) Wait(ns string, key cachekey.Key) (w *Waiter, l Lease, ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := slotID{ns, key}
	s := t.slots[id]
	if t.closed || s == nil || s.holder == "" || !t.now().Before(s.expires) {
		return nil, Lease{}, false, nil
	}
	if t.waiters >= t.maxWaiters {
		return nil, Lease{}, false, fmt.Errorf("%w: %d waiters parked (the limit)", ErrTooManyWaiters, t.waiters)
	}
	w = &Waiter{id: id, c: make(chan struct{})}
	if s.waiters == nil {
		s.waiters = make(map[*Waiter]struct{})
	}
	s.waiters[w] = struct{}{}
	t.waiters++
	return w, Lease{Holder: s.holder, Expires: s.expires}, true, nil
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
	delete(s.waiters, w)
	t.waiters--
	if s.holder == "" && len(s.waiters) == 0 {
		delete(t.slots, w.id)
	}
}

// Close wakes every parked waiter with Closed and refuses new waiters;
// leases can still be taken and released. The server calls it when it
// starts shutting down, so that long polls end at once.
func (t *Table) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, s := range t.slots {
		for w := range s.waiters {
			w.outcome = Closed
			close(w.c)
		}
		t.waiters -= len(s.waiters)
		s.waiters = nil
	}
}

// Counts returns the number of live (unexpired) leases and parked waiters,
// for metrics.
func (t *Table) Counts() (held, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, s := range t.slots {
		if s.holder != "" && now.Before(s.expires) {
			held++
		}
	}
	return held, t.waiters
}

// endLocked ends the slot's lease and wakes its waiters with o.
func (t *Table) endLocked(id slotID, s *slot, o Outcome) {
	if s.holder != "" {
		t.live--
	}
	for w := range s.waiters {
		w.outcome = o
		close(w.c)
	}
	t.waiters -= len(s.waiters)
	delete(t.slots, id)
}

// sweepLocked drops every expired lease, waking its waiters with Expired.
func (t *Table) sweepLocked(now time.Time) {
	for id, s := range t.slots {
		if s.holder != "" && !now.Before(s.expires) {
			t.endLocked(id, s, Expired)
		}
	}
}
