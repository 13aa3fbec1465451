// Package lease keeps the table of compile leases and the waiters parked
// behind them.
//
// A lease says "holder H is compiling (namespace, key) until time E". The
// first caller to Acquire a free or expired slot gets it; others learn who
// holds it and may Wait for the outcome. The table is bounded (leases and
// waiters).
//
// # One replica
//
// Without Config.Shared the table lives in memory, holds no goroutines and
// does no I/O: the HTTP layer owns the clock-driven parts (it re-checks
// Holder when a lease's expiry passes). A restart forgets every lease, which
// is safe: waiters then time out or get a 404 and compile themselves.
//
// # A fleet
//
// With Config.Shared (an object per lease in the fleet's bucket, see
// fleet/state) the shared backend is the truth about who holds a lease, so
// N hosts behind a load balancer compile once even when they reach
// different replicas; the table keeps its local waiters and a local copy of
// each lease it knows. The protocol:
//
//   - Acquire loads the record. None: Create. Another holder's record whose
//     expiry plus SkewMargin has not passed: refused, with that lease. An
//     expired record, or the caller's own: Replace on the version read, so
//     that of two replicas taking over one expired lease exactly one wins.
//     ErrChanged means another replica moved first: load again (a few
//     times).
//   - Release loads the record and, if the holder matches, Deletes it on
//     the version read; Written deletes it whoever holds it.
//   - Wait parks behind a record it loads when the local table knows no
//     lease; a goroutine re-reads the records behind parked waiters every
//     PollInterval and wakes them (Released) when the record is gone, so a
//     compile ending on another replica is seen within about a second.
//     An entry written on another replica reaches no local waiter
//     directly: the HTTP layer's wait loop should also check the store
//     about every second.
//
// Expiries are absolute wall-clock times written by the granting replica:
// replicas need clocks that agree to well within SkewMargin (NTP-level), and
// a record only counts as expired SkewMargin after its stated expiry.
//
// Fail open: the cache must never stop a compile because the shared tier is
// down. A fault (or SharedTimeout) makes Acquire decide on the local table
// alone and mark a grant Lease.Local; Holder and Wait answer from the local
// table; Release and Written end the local lease and leave the shared one
// to lapse. Each fault is counted (SharedFaults) and logged at most every
// 10 s.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// ErrNotHeld means no live lease exists for the slot. A Shared backend
	// also returns it from Load when no lease object exists.
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
	// DefaultSharedTimeout bounds one Table call's requests to Shared.
	DefaultSharedTimeout = 2 * time.Second
	// DefaultSkewMargin is how long after its expiry another replica's
	// lease is still honoured, for clocks that disagree.
	DefaultSkewMargin = 2 * time.Second
	// DefaultPollInterval is how often parked waiters' shared leases are
	// re-read.
	DefaultPollInterval = time.Second
)

// Config configures a Table. The zero value means defaults, one replica.
type Config struct {
	// MaxLeases bounds live leases (DefaultMaxLeases when 0).
	MaxLeases int
	// MaxWaiters bounds parked waiters across all slots (DefaultMaxWaiters when 0).
	MaxWaiters int
	// Now returns the current time (time.Now when nil); tests substitute it.
	Now func() time.Time

	// Shared, when set, makes leases fleet-wide (see shared.go). Nil keeps
	// the table in memory, as on a single replica.
	Shared Shared
	// SharedTimeout bounds the requests to Shared that one call makes
	// (DefaultSharedTimeout when 0); past it the call fails open.
	SharedTimeout time.Duration
	// SkewMargin is added to the expiry of every lease read from Shared
	// before it counts as expired (DefaultSkewMargin when 0; negative means
	// none). Replicas' clocks must agree to well within it (NTP does).
	SkewMargin time.Duration
	// PollInterval is how often the table re-reads the shared leases its
	// waiters park behind, so that a lease ended on another replica wakes
	// them (DefaultPollInterval when 0).
	PollInterval time.Duration
	// Logger receives fail-open warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// Lease is a snapshot of one lease.
type Lease struct {
	// Holder names who compiles.
	Holder string
	// Expires is when the lease lapses. For a lease read from Shared and
	// reported to anyone but the holder being granted it, it is the time
	// another holder may take it over: the holder's expiry plus SkewMargin.
	Expires time.Time
	// Local is true for a lease granted while Shared could not be reached:
	// it binds this replica only, and another replica may compile too.
	Local bool
	// Renewed is true for a grant to the holder that already held the live
	// lease: it extended that lease rather than granting a new one, and
	// never moved its expiry earlier (renewedExpiry). Holders
	// name a process (host:pid), so a caller that did not take the lease
	// itself learns that another part of its process compiles the key and
	// should wait for the entry instead of compiling it a second time.
	Renewed bool
	// Granted is, on a grant, how long the lease runs from the moment it
	// was granted (Expires minus then): the ttl asked for, or more when a
	// renewal kept a later expiry. Zero on a refusal.
	Granted time.Duration
}

// Outcome says why a waiter was woken.
type Outcome int

// Outcomes delivered to waiters.
const (
	// Pending means the waiter has not been woken yet.
	Pending Outcome = iota
	// Written means the entry was stored; the waiter should read it.
	Written
	// Released means the holder released the lease without writing, or the
	// shared lease vanished (ended on another replica, written or not): the
	// waiter should look for the entry and compile when it is missing.
	Released
	// Expired means the lease expired and was swept from the table.
	Expired
	// Closed means the table was closed (the server is shutting down).
	Closed
	// Displaced means the waiter was unparked to make room for another
	// namespace's: the table's waiters were full and the waiter's namespace
	// held more than half of them. The waiter should compile itself.
	Displaced
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
	case Displaced:
		return "displaced"
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
	// remote: a copy of a shared lease this table did not grant, kept only
	// while waiters park behind it (not counted in live).
	remote bool
	// local: granted without Shared (fail open); Poll leaves it alone.
	local bool
}

// Table is the lease table. It is safe for concurrent use.
type Table struct {
	mu      sync.Mutex
	slots   map[slotID]*slot
	live    int // slots this table granted (possibly expired, not yet swept)
	waiters int
	// liveNS and waitersNS count live and waiters per namespace, so that a
	// full table can take room back from a namespace holding more than
	// half of it (fair shares) rather than refuse every other namespace.
	liveNS     map[string]int
	waitersNS  map[string]int
	maxLeases  int
	maxWaiters int
	now        func() time.Time
	closed     bool

	shared  Shared
	timeout time.Duration
	margin  time.Duration
	log     *slog.Logger
	faults  atomic.Uint64
	lastLog atomic.Int64 // unix nanos of the last fail-open warning
	stop    context.CancelFunc
	polling sync.WaitGroup
}

// New returns an empty table. With cfg.Shared it also starts the goroutine
// that polls the shared leases behind parked waiters; Close stops it.
func New(cfg Config) *Table {
	t := &Table{
		slots:      make(map[slotID]*slot),
		liveNS:     make(map[string]int),
		waitersNS:  make(map[string]int),
		maxLeases:  cfg.MaxLeases,
		maxWaiters: cfg.MaxWaiters,
		now:        cfg.Now,
		shared:     cfg.Shared,
		timeout:    cfg.SharedTimeout,
		margin:     cfg.SkewMargin,
		log:        cfg.Logger,
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
	if t.timeout <= 0 {
		t.timeout = DefaultSharedTimeout
	}
	switch {
	case t.margin == 0:
		t.margin = DefaultSkewMargin
	case t.margin < 0:
		t.margin = 0
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	if t.shared != nil {
		every := cfg.PollInterval
		if every <= 0 {
			every = DefaultPollInterval
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.stop = cancel
		t.polling.Add(1)
		go t.pollEvery(ctx, every)
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
// With Config.Shared the decision is the shared backend's, so it holds
// across replicas; when the backend cannot be reached within SharedTimeout
// the table decides alone and a grant carries Lease.Local (fail open: the
// caller compiles; a warning is logged and SharedFaults counts it).
//
// # Errors
//   - ErrInvalidHolder for an empty or overlong holder.
//   - ErrTableFull when a new lease would exceed MaxLeases even after
//     sweeping expired leases.
func (t *Table) Acquire(ctx context.Context, ns string, key cachekey.Key, holder string, ttl time.Duration) (l Lease, granted bool, err error) {
	if err := ValidateHolder(holder); err != nil {
		return Lease{}, false, err
	}
	if t.shared == nil {
		return t.acquireLocal(ns, key, holder, ttl, false)
	}
	return t.acquireShared(ctx, ns, key, holder, ttl)
}

// acquireLocal is Acquire decided by this table alone; local marks a
// fail-open grant.
func (t *Table) acquireLocal(ns string, key cachekey.Key, holder string, ttl time.Duration, local bool) (Lease, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	id := slotID{ns, key}
	s := t.slots[id]
	if s != nil && s.holder != "" && s.holder != holder && now.Before(s.expires) {
		return Lease{Holder: s.holder, Expires: s.expires, Local: s.local}, false, nil
	}
	if err := t.reserveLocked(id, now); err != nil {
		return Lease{}, false, err
	}
	// Waiters parked behind an expired lease keep waiting for the new holder.
	renewed := s != nil && !s.remote && s.holder == holder && now.Before(s.expires)
	l := Lease{Holder: holder, Expires: now.Add(ttl), Local: local, Renewed: renewed, Granted: ttl}
	if renewed {
		l.Expires = renewedExpiry(s.expires, l.Expires)
		l.Granted = l.Expires.Sub(now)
	}
	t.setLocked(id, l, false)
	return l, true, nil
}

// renewedExpiry is the expiry of a live lease renewed by its holder: the
// later of the one it had and the one asked for. A holder names a process,
// so the renewal may come from another thread of it, asking with a shorter
// ttl_s than the thread compiling took the lease for; shortening would let
// another process take the lease over and compile the key a second time.
func renewedExpiry(had, asked time.Time) time.Time {
	if had.After(asked) {
		return had
	}
	return asked
}

// reserveLocked checks that (ns, key) may become a lease this table grants:
// one already counted, or room for one more after sweeping expired leases.
func (t *Table) reserveLocked(id slotID, now time.Time) error {
	if s := t.slots[id]; s != nil && s.holder != "" && !s.remote {
		return nil
	}
	if t.live >= t.maxLeases {
		t.sweepLocked(now)
	}
	if t.live >= t.maxLeases && !t.displaceLeaseLocked(id.ns) {
		return fmt.Errorf("%w: %d live leases (the limit; namespace %q holds %d)", ErrTableFull, t.live, id.ns, t.liveNS[id.ns])
	}
	return nil
}

// setLocked makes the slot hold l: granted by this table unless remote.
func (t *Table) setLocked(id slotID, l Lease, remote bool) {
	s := t.slots[id]
	if s == nil {
		s = &slot{}
		t.slots[id] = s
	}
	was := s.holder != "" && !s.remote
	if now := !remote; was != now {
		if now {
			t.live++
			t.liveNS[id.ns]++
		} else {
			t.live--
			t.decLocked(t.liveNS, id.ns, 1)
		}
	}
	s.holder, s.expires, s.remote, s.local = l.Holder, l.Expires, remote, l.Local
}

// Holder returns the live lease on (ns, key), if any. An expired lease is
// reported as absent. With Config.Shared it reads the shared lease (so a
// renewal or takeover on another replica shows), updating the local copy;
// when the backend cannot be reached it answers from the local table.
func (t *Table) Holder(ctx context.Context, ns string, key cachekey.Key) (Lease, bool) {
	if t.shared != nil {
		if l, held, err := t.refresh(ctx, slotID{ns, key}); err == nil {
			return l, held
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[slotID{ns, key}]
	if s == nil || s.holder == "" || !t.now().Before(s.expires) {
		return Lease{}, false
	}
	return Lease{Holder: s.holder, Expires: s.expires, Local: s.local}, true
}

// Release ends holder's lease on (ns, key) without an entry; waiters are woken
// with Released (on other replicas, by their next poll).
//
// With Config.Shared, when the backend cannot be reached the local lease
// ends and Release answers as if the shared one did (it lapses at its
// expiry; the failure is logged and counted).
//
// # Errors
//   - ErrNotHeld when no live lease exists.
//   - ErrHeldByOther (wrapped with the current holder) when someone else holds it.
func (t *Table) Release(ctx context.Context, ns string, key cachekey.Key, holder string) (Lease, error) {
	if t.shared != nil {
		return t.releaseShared(ctx, ns, key, holder)
	}
	return t.releaseLocal(ns, key, holder)
}

func (t *Table) releaseLocal(ns string, key cachekey.Key, holder string) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := slotID{ns, key}
	s := t.slots[id]
	if s == nil || s.holder == "" || !t.now().Before(s.expires) {
		return Lease{}, ErrNotHeld
	}
	cur := Lease{Holder: s.holder, Expires: s.expires, Local: s.local}
	if s.holder != holder {
		return cur, fmt.Errorf("%w: held by %q", ErrHeldByOther, s.holder)
	}
	t.endLocked(id, s, Released)
	return cur, nil
}

// Written records that the entry (ns, key) was stored: the lease, whoever
// holds it, ends and every waiter is woken with Written. It is a cheap no-op
// when the slot is unknown. With Config.Shared it also deletes the shared
// lease, so waiters on other replicas wake at their next poll; a backend
// fault is logged and the shared lease lapses at its expiry.
func (t *Table) Written(ctx context.Context, ns string, key cachekey.Key) {
	t.mu.Lock()
	id := slotID{ns, key}
	if s := t.slots[id]; s != nil {
		t.endLocked(id, s, Written)
	}
	t.mu.Unlock()
	if t.shared != nil {
		t.writtenShared(ctx, ns, key)
	}
}

// Close wakes every parked waiter with Closed and refuses new waiters;
// leases can still be taken and released. The server calls it when it
// starts shutting down, so that long polls end at once. It also stops the
// shared-lease poll.
func (t *Table) Close() {
	if t.stop != nil {
		t.stop()
		t.polling.Wait()
	}
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
	clear(t.waitersNS)
}

// endLocked ends the slot's lease and wakes its waiters with o.
func (t *Table) endLocked(id slotID, s *slot, o Outcome) {
	if s.holder != "" && !s.remote {
		t.live--
		t.decLocked(t.liveNS, id.ns, 1)
	}
	for w := range s.waiters {
		w.outcome = o
		close(w.c)
	}
	t.waiters -= len(s.waiters)
	t.decLocked(t.waitersNS, id.ns, len(s.waiters))
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
