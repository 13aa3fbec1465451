package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cachesvc/cachesvc/cachekey"
)

// ErrChanged is what a Shared backend returns when a conditional write
// finds the lease changed since it was read (S3: 412 Precondition Failed):
// another replica won the race.
var ErrChanged = errors.New("shared lease changed")

// Shared is a fleet-wide store of lease records with compare-and-swap,
// declared here where it is consumed (fleet/state implements it on S3).
// The Table owns the policy (expiry, skew margin, holder checks); Shared
// only stores records and refuses stale writes. Version is an opaque token
// of one stored record (S3: its ETag) that must change with every write,
// even of identical holder and expiry.
//
// Any error other than ErrNotHeld and ErrChanged is a fault (unreachable,
// timed out, 5xx): the Table then fails open. Implementations must be safe
// for concurrent use by many processes.
type Shared interface {
	// Load returns the lease record on (ns, key) and its version, or
	// ErrNotHeld when there is none. Expired records are returned as they
	// are.
	Load(ctx context.Context, ns string, key cachekey.Key) (l Lease, version string, err error)
	// Create stores l only if no record exists (If-None-Match: *), or
	// returns ErrChanged.
	Create(ctx context.Context, ns string, key cachekey.Key, l Lease) (version string, err error)
	// Replace stores l only if the record's version is still version
	// (If-Match), or returns ErrChanged (also when it was deleted).
	Replace(ctx context.Context, ns string, key cachekey.Key, version string, l Lease) (string, error)
	// Delete removes the record only if its version is still version, or
	// returns ErrChanged; a missing record is no error.
	Delete(ctx context.Context, ns string, key cachekey.Key, version string) error
}

// maxRaces bounds how often one call re-reads a record another replica
// changed under it.
const maxRaces = 4

// SharedFaults returns how many shared-backend faults made the table fail
// open, for metrics.
func (t *Table) SharedFaults() uint64 { return t.faults.Load() }

// view is how a record read from Shared looks to anyone but its holder:
// live until its expiry plus the skew margin.
func (t *Table) view(l Lease) Lease {
	return Lease{Holder: l.Holder, Expires: l.Expires.Add(t.margin)}
}

// fault counts a shared-backend failure and logs it, at most every 10 s.
func (t *Table) fault(op string, id slotID, err error) {
	n := t.faults.Add(1)
	now := time.Now().UnixNano()
	last := t.lastLog.Load()
	if now-last < int64(10*time.Second) || !t.lastLog.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn("shared lease backend failed; failing open on this replica",
		"op", op, "namespace", id.ns, "key", id.key.String(), "faults", n, "err", err)
}

func (t *Table) acquireShared(ctx context.Context, ns string, key cachekey.Key, holder string, ttl time.Duration) (Lease, bool, error) {
	id := slotID{ns, key}
	t.mu.Lock()
	err := t.reserveLocked(id, t.now())
	t.mu.Unlock()
	if err != nil {
		return Lease{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	for range maxRaces {
		cur, ver, err := t.shared.Load(ctx, ns, key)
		now := t.now()
		want := Lease{Holder: holder, Expires: now.Add(ttl), Granted: ttl}
		// The holder's own live record: this grant renews it (see
		// Lease.Renewed). Its raw expiry counts, not the skew margin.
		want.Renewed = err == nil && cur.Holder == holder && now.Before(cur.Expires)
		if want.Renewed {
			want.Expires = renewedExpiry(cur.Expires, want.Expires)
			want.Granted = want.Expires.Sub(now)
		}
		switch {
		case errors.Is(err, ErrNotHeld):
			_, err = t.shared.Create(ctx, ns, key, want)
		case err != nil:
		case cur.Holder != holder && now.Before(t.view(cur).Expires):
			v := t.view(cur)
			t.mu.Lock()
			t.syncLocked(id, v)
			t.mu.Unlock()
			return v, false, nil
		default: // expired, or the caller's own: take it over or renew it
			_, err = t.shared.Replace(ctx, ns, key, ver, want)
		}
		if err == nil {
			t.mu.Lock()
			t.setLocked(id, Lease{Holder: holder, Expires: t.view(want).Expires}, false)
			t.mu.Unlock()
			return want, true, nil
		}
		if !errors.Is(err, ErrChanged) {
			t.fault("acquire", id, err)
			return t.acquireLocal(ns, key, holder, ttl, true)
		}
	}
	// Other replicas kept changing the record: one of them holds it now.
	if cur, _, err := t.shared.Load(ctx, ns, key); err == nil && cur.Holder != holder {
		return t.view(cur), false, nil
	} else if err != nil && !errors.Is(err, ErrNotHeld) {
		t.fault("acquire", id, err)
	}
	return t.acquireLocal(ns, key, holder, ttl, true)
}

func (t *Table) releaseShared(ctx context.Context, ns string, key cachekey.Key, holder string) (Lease, error) {
	id := slotID{ns, key}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	for range maxRaces {
		cur, ver, err := t.shared.Load(ctx, ns, key)
		switch {
		case errors.Is(err, ErrNotHeld):
			return t.releaseMissing(id, holder)
		case err != nil:
			return t.releaseFault(id, holder, err)
		case cur.Holder != holder:
			now := t.now()
			if v := t.view(cur); now.Before(v.Expires) {
				return v, fmt.Errorf("%w: held by %q", ErrHeldByOther, cur.Holder)
			}
			return Lease{}, ErrNotHeld
		}
		err = t.shared.Delete(ctx, ns, key, ver)
		if errors.Is(err, ErrChanged) {
			continue
		}
		if err != nil {
			return t.releaseFault(id, holder, err)
		}
		t.mu.Lock()
		if s := t.slots[id]; s != nil {
			t.endLocked(id, s, Released)
		}
		t.mu.Unlock()
		if !t.now().Before(cur.Expires) {
			return Lease{}, ErrNotHeld // it had lapsed; the record is cleaned up anyway
		}
		return cur, nil
	}
	return Lease{}, fmt.Errorf("release lease %s/%s: %w: other replicas kept changing it", ns, key, ErrChanged)
}

// releaseMissing answers Release when the backend has no record: only a
// lease granted locally while the backend was down can still be ended.
func (t *Table) releaseMissing(id slotID, holder string) (Lease, error) {
	t.mu.Lock()
	s := t.slots[id]
	local := s != nil && s.local
	if s != nil && !local {
		t.endLocked(id, s, Released) // a stale copy: it ended on another replica
	}
	t.mu.Unlock()
	if local {
		return t.releaseLocal(id.ns, id.key, holder)
	}
	return Lease{}, ErrNotHeld
}

// releaseFault fails Release open: the local lease ends; the shared record
// lapses at its expiry.
func (t *Table) releaseFault(id slotID, holder string, err error) (Lease, error) {
	t.fault("release", id, err)
	l, lerr := t.releaseLocal(id.ns, id.key, holder)
	if errors.Is(lerr, ErrNotHeld) {
		return Lease{Holder: holder}, nil
	}
	return l, lerr
}

func (t *Table) writtenShared(ctx context.Context, ns string, key cachekey.Key) {
	id := slotID{ns, key}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	for range maxRaces {
		_, ver, err := t.shared.Load(ctx, ns, key)
		if errors.Is(err, ErrNotHeld) {
			return
		}
		if err == nil {
			if err = t.shared.Delete(ctx, ns, key, ver); err == nil {
				return
			}
		}
		if !errors.Is(err, ErrChanged) {
			t.fault("written", id, err)
			return
		}
	}
}

// refresh reads the shared record of id and brings the local copy in line:
// a vanished record ends the slot (Released), an expired one (past the
// margin) ends it (Expired), a live one updates holder and expiry. It
// returns the lease as others see it; it never creates a slot. A fault is returned (and counted) and
// leaves the slot alone; so does a slot granted locally while the backend
// was down, which the backend does not know.
func (t *Table) refresh(ctx context.Context, id slotID) (Lease, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	cur, _, err := t.shared.Load(ctx, id.ns, id.key)
	if err != nil && !errors.Is(err, ErrNotHeld) {
		if !errors.Is(err, context.Canceled) { // a shutdown is no fault
			t.fault("read", id, err)
		}
		return Lease{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[id]
	if s != nil && s.local {
		return Lease{}, false, errors.New("lease granted locally")
	}
	if err != nil { // ErrNotHeld
		if s != nil {
			t.endLocked(id, s, Released)
		}
		return Lease{}, false, nil
	}
	v := t.view(cur)
	if !t.now().Before(v.Expires) {
		if s != nil {
			t.endLocked(id, s, Expired)
		}
		return Lease{}, false, nil
	}
	t.syncLocked(id, v)
	return v, true, nil
}

// syncLocked updates the local copy of a lease, if the table has one, to
// the shared record's view v: a new expiry (renewed through another
// replica) or a new holder (taken over there).
func (t *Table) syncLocked(id slotID, v Lease) {
	s := t.slots[id]
	switch {
	case s == nil || s.local:
	case s.holder == v.Holder:
		s.expires = v.Expires
	default:
		t.setLocked(id, v, true)
	}
}

// pollParallel bounds the records one poll reads at once.
const pollParallel = 8

// Poll re-reads, once, the shared record behind every slot with parked
// waiters (see refresh). New runs it every PollInterval when Shared is set;
// it is exported for tests and for callers that want an immediate check.
func (t *Table) Poll(ctx context.Context) {
	if t.shared == nil {
		return
	}
	t.mu.Lock()
	var ids []slotID
	for id, s := range t.slots {
		if len(s.waiters) > 0 && !s.local {
			ids = append(ids, id)
		}
	}
	t.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(pollParallel)
	for _, id := range ids {
		g.Go(func() error { _, _, _ = t.refresh(ctx, id); return nil })
	}
	_ = g.Wait()
}

func (t *Table) pollEvery(ctx context.Context, every time.Duration) {
	defer t.polling.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Poll(ctx)
		}
	}
}
