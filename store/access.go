package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// flushLoop writes batched access state, and looks at the store's
// directory (watchDir), every Config.FlushInterval.
func (s *Badger) flushLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.watchDir() // dirhealth.go
			if err := s.enterWrite(); errors.Is(err, ErrDirUnavailable) {
				s.skipWrite("access-time flush", "access times and hit counts wait in memory", err)
				continue
			} else if err != nil {
				return
			}
			err := s.flushAccess()
			s.leaveWrite()
			if err != nil {
				s.log.Warn("flush access times failed", "err", err)
			}
		}
	}
}

// flushAccess writes batched access times and hit counts to the metadata.
// The caller holds closeMu shared, or is Close after every operation ended.
func (s *Badger) flushAccess() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	ups := s.acct.dirtyAccesses()
	s.mu.Unlock()
	if len(ups) == 0 {
		return nil
	}
	txn := s.db.NewTransaction(true)
	var done []accessUpdate
	commit := func() error {
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("flush access times: %w", err)
		}
		// The rewritten records carry new hit counts and access times: a
		// cached copy would count the flushed hits twice with the
		// accounting's, or lose them.
		refs := make([]entryRef, len(done))
		for i, u := range done {
			refs[i] = u.ref
		}
		s.hotMeta.forget(refs...) // hotmeta.go
		s.mu.Lock()
		for _, u := range done {
			s.acct.flushed(u)
		}
		s.mu.Unlock()
		done = done[:0]
		txn = s.db.NewTransaction(true)
		return nil
	}
	defer func() { txn.Discard() }()
	for _, u := range ups {
		m, err := s.readMeta(txn, u.ref)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if u.atime.After(m.LastAccess) {
			m.LastAccess = u.atime
		}
		m.Hits += u.hits
		b, err := encodeMeta(m)
		if err != nil {
			return err
		}
		err = txn.Set(metaKey(u.ref.ns, u.ref.key), b)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := commit(); err != nil {
				return err
			}
			err = txn.Set(metaKey(u.ref.ns, u.ref.key), b)
		}
		if err != nil {
			return fmt.Errorf("flush access times: %w", err)
		}
		done = append(done, u)
	}
	return commit()
}
