package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// reserve promises n bytes to an upload, evicting least recently used
// entries until they fit. It fails with ErrFull when n cannot fit even with
// the store empty (other uploads' reservations count), and with
// ErrReclaiming when writing n more bytes would take the directory past
// Config.MaxDiskBytes and GC has not made room within Config.DiskWait
// (diskbound.go). Nothing is evicted for a reservation the disk refuses.
func (s *Badger) reserve(ctx context.Context, n int64) error {
	if s.cfg.MaxBytes <= 0 {
		return nil
	}
	deadline := time.Now().Add(s.cfg.DiskWait)
	for {
		err := s.reserveOnce(n)
		if !errors.Is(err, errDiskBusy) {
			return err
		}
		if !s.waitForDisk(ctx, deadline) {
			s.kickGC()
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("reserve %d bytes: %w", n, err)
			}
			return fmt.Errorf("reserve %d bytes: the store's directory holds about %d bytes of its %d byte bound: %w",
				n, s.diskHeld(), s.cfg.MaxDiskBytes, ErrReclaiming)
		}
	}
}

// reserveOnce is one try of reserve; it returns errDiskBusy when the disk
// bound refuses n bytes now.
func (s *Badger) reserveOnce(n int64) error {
	var purges []func()
	var evicted []Meta
	defer func() {
		for _, p := range purges {
			p()
		}
		// After every lock is released: the callback may call the store.
		if s.cfg.OnEvict != nil {
			for _, m := range evicted {
				s.cfg.OnEvict(m)
			}
		}
	}()
	if err := s.enterWrite(); err != nil {
		return err
	}
	defer s.leaveWrite()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.diskAdmits(n) {
		return errDiskBusy
	}
	for {
		s.mu.Lock()
		if !s.acct.possible(n) {
			max, inFlight := s.acct.max, s.acct.reserved
			s.mu.Unlock()
			return fmt.Errorf("reserve %d bytes (max %d, %d reserved by uploads in flight): %w", n, max, inFlight, ErrFull)
		}
		if s.acct.fits(n) {
			s.acct.reserve(n)
			s.mu.Unlock()
			return nil
		}
		ref, ok := s.acct.oldest()
		s.mu.Unlock()
		if !ok {
			// Quarantined entries go last (quarantine_life.go).
			purge, ok, err := s.evictHeldLocked()
			purges = append(purges, purge)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("reserve %d bytes: %w", n, ErrFull)
			}
			continue
		}
		var m Meta
		if s.cfg.OnEvict != nil {
			m = s.evictedMeta(ref)
		}
		purge, err := s.deleteLocked(ref, "")
		if err != nil {
			return fmt.Errorf("evict %s/%s: %w", ref.ns, ref.key, err)
		}
		if s.cfg.OnEvict != nil {
			evicted = append(evicted, m)
		}
		s.mu.Lock()
		s.acct.evictions++
		s.mu.Unlock()
		s.log.Debug("entry evicted", "namespace", ref.ns, "key", ref.key.String())
		purges = append(purges, purge)
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
