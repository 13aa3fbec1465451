package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Reading quarantine records: one entry's, and the paged listing of a
// namespace's (quarantine.go has the reports and the quarantine itself).

// readQuarantined reads ref's quarantine record; none is ErrNotFound.
func readQuarantined(txn *badger.Txn, ref entryRef) (Quarantined, error) {
	item, err := txn.Get(quarantineKey(ref.ns, ref.key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Quarantined{}, ErrNotFound
	}
	if err != nil {
		return Quarantined{}, fmt.Errorf("read quarantine record of %s/%s: %w", ref.ns, ref.key, err)
	}
	var q Quarantined
	err = item.Value(func(v []byte) error {
		var err error
		q, err = decodeQuarantined(ref, v)
		return err
	})
	return q, err
}

// decodeQuarantined decodes a quarantine record stored under ref.
func decodeQuarantined(ref entryRef, v []byte) (Quarantined, error) {
	var rec metaRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return Quarantined{}, fmt.Errorf("decode quarantine record of %s/%s: %w", ref.ns, ref.key, err)
	}
	m, err := decodeMeta(ref, v)
	if err != nil {
		return Quarantined{}, err
	}
	cause := rec.Cause
	if cause == "" {
		cause = CauseCorrupt
	}
	return Quarantined{Meta: m, QuarantinedAt: rec.QuarantinedAt, Cause: cause, Reason: rec.Reason}, nil
}

// WalkQuarantined calls fn with every quarantined entry of ns whose key
// sorts after after (nil: from the first), in key order, until fn returns
// false or ctx ends. It reads pages of walkPage records, each from its own
// snapshot, and calls fn outside of them; fn must not call the store.
func (s *Badger) WalkQuarantined(ctx context.Context, ns string, after *Key, fn func(Quarantined) bool) error {
	if err := checkNamespace("list quarantined entries", ns); err != nil {
		return err
	}
	var cursor []byte
	if after != nil {
		cursor = quarantineKey(ns, *after)
	}
	prefix := append([]byte(prefixQuarantine+ns), 0)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list quarantined entries: %w", err)
		}
		page, last, more, err := s.quarantinedPage(ns, prefix, cursor)
		if err != nil {
			return err
		}
		for _, q := range page {
			if !fn(q) {
				return nil
			}
		}
		if !more {
			return nil
		}
		cursor = last
	}
}

// quarantinedPage reads up to walkPage quarantine records under prefix after
// cursor, with their report counts.
func (s *Badger) quarantinedPage(ns string, prefix, cursor []byte) (page []Quarantined, last []byte, more bool, err error) {
	if err := s.enter(); err != nil {
		return nil, nil, false, err
	}
	defer s.leave()
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		it.Seek(prefix)
		if cursor != nil {
			it.Seek(cursor)
			if it.Valid() && bytes.Equal(it.Item().Key(), cursor) {
				it.Next()
			}
		}
		for ; it.Valid(); it.Next() {
			if len(page) == walkPage {
				more = true
				return nil
			}
			item := it.Item()
			last = item.KeyCopy(last[:0])
			ref, ok := parseEntryKey(item.Key())
			if !ok || ref.ns != ns {
				continue
			}
			var q Quarantined
			if err := item.Value(func(v []byte) error {
				var err error
				q, err = decodeQuarantined(ref, v)
				return err
			}); err != nil {
				s.log.Warn("skipping unreadable quarantine record", "namespace", ref.ns, "key", ref.key.String(), "err", err)
				continue
			}
			if rec, err := readReports(txn, ref); err == nil {
				q.Reports = rec.Total
			}
			s.mu.Lock()
			_, q.Restorable = s.acct.held[ref]
			s.mu.Unlock()
			page = append(page, q)
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("list quarantined entries: %w", err)
	}
	return page, last, more, nil
}
