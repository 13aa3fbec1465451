package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// reserve promises a claim to an upload (see claim), evicting least
// recently used entries until it fits: the namespace's own (reason quota)
// while its quota refuses the claim, then the store's (reason size) while
// Config.MaxBytes does. It fails with a *QuotaError (ErrQuota) when the
// claim cannot fit the namespace's quota even with the namespace empty,
// with ErrFull when its bytes cannot fit the store even with the store
// empty (other uploads' reservations count in both), and with
// ErrReclaiming when writing its bytes would take the directory past
// Config.MaxDiskBytes and GC has not made room within Config.DiskWait
// (diskbound.go). Nothing is evicted for a reservation the disk refuses
// unless GC found nothing left to reclaim and the directory is full of
// live entries (evictForDisk, mayEvictForDisk).
//
// Every successful reserve must be undone with release (or by commit).
func (s *Badger) reserve(ctx context.Context, c claim) error {
	deadline := time.Now().Add(s.cfg.DiskWait)
	for {
		err := s.reserveOnce(c)
		if !errors.Is(err, errDiskBusy) {
			return err
		}
		if !s.waitForDisk(ctx, deadline) {
			s.kickGC()
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("reserve %d bytes: %w", c.bytes, err)
			}
			return fmt.Errorf("reserve %d bytes: the store's directory holds about %d bytes of its %d byte bound: %w",
				c.bytes, s.diskHeld(), s.cfg.MaxDiskBytes, ErrReclaiming)
		}
	}
}

// reserveIfFits reserves c and reports true when it fits under every bound
// now, evicting nothing; false leaves the caller to reserve as bytes
// arrive. It fails as reserve does, at once, when c could never fit: more
// than the store or the namespace's quota can hold, counting the uploads
// in flight.
func (s *Badger) reserveIfFits(c claim) (bool, error) {
	if s.diskBounded() && c.bytes > 0 {
		// Disk admission and the reservation are one step under wmu
		// (diskAdmits), as in reserveOnce.
		if err := s.enterWrite(); err != nil {
			return false, err
		}
		defer s.leaveWrite()
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if !s.diskAdmits(c.bytes) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return false, s.acct.impossibleClaim(c)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.acct.impossibleClaim(c); err != nil {
		return false, err
	}
	if !s.acct.claimFitsNow(c) {
		return false, nil
	}
	s.acct.reserveClaim(c)
	return true, nil
}

// release returns what an upload's reservations hold.
func (s *Badger) release(c claim) {
	if c.zero() {
		return
	}
	s.mu.Lock()
	s.acct.releaseClaim(c)
	s.mu.Unlock()
}

// reserveOnce is one try of reserve; it returns errDiskBusy when the disk
// bound refuses the claim's bytes now.
func (s *Badger) reserveOnce(c claim) error {
	// A claim that fits without evicting and writes nothing the disk
	// bound must admit needs no write lock: the check and the reservation
	// are one step under mu.
	if c.bytes == 0 || !s.diskBounded() {
		s.mu.Lock()
		if s.acct.claimFitsNow(c) {
			s.acct.reserveClaim(c)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
	}
	var purges []func()
	var gone []evicted
	defer func() {
		for _, p := range purges {
			p()
		}
		s.notifyEvicted(gone)
	}()
	if err := s.enterWrite(); err != nil {
		return err
	}
	defer s.leaveWrite()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.diskAdmits(c.bytes) {
		if s.gcExhausted.Load() && s.mayEvictForDisk() {
			s.gcExhausted.Store(false)
			p, ev, err := s.evictForDisk()
			purges, gone = append(purges, p...), append(gone, ev...)
			if err != nil {
				return err
			}
		}
		return errDiskBusy
	}
	for {
		s.mu.Lock()
		if err := s.acct.impossibleClaim(c); err != nil {
			s.mu.Unlock()
			return err
		}
		fit, ref, reason, ok := s.acct.fitsClaim(c)
		if fit {
			s.acct.reserveClaim(c)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		if !ok {
			if reason != evictSize {
				return fmt.Errorf("reserve %d bytes: %w", c.bytes, ErrFull)
			}
			// Nothing live is left to evict for the store's bound:
			// quarantined entries go last (quarantine_life.go).
			purge, ok, err := s.evictHeldLocked()
			purges = append(purges, purge)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("reserve %d bytes: %w", c.bytes, ErrFull)
			}
			continue
		}
		purge, e, err := s.evictLocked(ref, reason)
		if err != nil {
			return err
		}
		purges = append(purges, purge)
		if s.cfg.OnEvict != nil {
			gone = append(gone, e)
		}
	}
}

// evicted is an entry the store removed on its own, for Config.OnEvict.
type evicted struct {
	meta   Meta
	reason evictReason
}

// evictLocked removes an entry the store chose to remove for reason and
// counts it; with Config.OnEvict set it also returns the entry's metadata
// and the reason for notifyEvicted. The caller holds wmu and must call
// purge after releasing it, then notifyEvicted.
func (s *Badger) evictLocked(ref entryRef, reason evictReason) (purge func(), e evicted, err error) {
	e.reason = reason
	if s.cfg.OnEvict != nil {
		e.meta = s.evictedMeta(ref)
	}
	purge, err = s.deleteLocked(ref, "")
	if err != nil {
		return nil, e, fmt.Errorf("evict %s/%s (%s): %w", ref.ns, ref.key, reason, err)
	}
	s.mu.Lock()
	s.acct.countEviction(ref.ns, reason)
	s.mu.Unlock()
	s.log.Debug("entry evicted", "namespace", ref.ns, "key", ref.key.String(), "reason", reason.String())
	return purge, e, nil
}

// notifyEvicted calls Config.OnEvict for each evicted entry. Callers call it
// after every lock is released: the callback may call the store.
func (s *Badger) notifyEvicted(es []evicted) {
	if s.cfg.OnEvict == nil {
		return
	}
	for _, e := range es {
		s.cfg.OnEvict(e.meta, e.reason.String())
	}
}

// evictedMeta reads the metadata of an entry about to be evicted, for
// Config.OnEvict; on a read error it has only the namespace and key.
func (s *Badger) evictedMeta(ref entryRef) Meta {
	m := Meta{Namespace: ref.ns, Key: ref.key}
	_ = s.db.View(func(txn *badger.Txn) error {
		if got, err := s.readMeta(txn, ref); err == nil {
			m = s.overlay(got)
		}
		return nil
	})
	return m
}
