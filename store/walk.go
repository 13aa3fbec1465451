package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// walkPage is how many entries Walk reads per read transaction.
const walkPage = 256

// Walk calls fn with the metadata of every entry in ns ("" for every
// namespace) in key order until fn returns false or ctx ends. It does not
// count as an access. fn must not call back into the store.
//
// Walk reads pages of entries, each from its own snapshot, and calls fn
// outside of them, so a slow fn holds up nothing; an entry added or removed
// during a Walk may or may not be visited.
func (s *Badger) Walk(ctx context.Context, ns string, fn func(Meta) bool) error {
	return s.walk(ctx, ns, nil, fn)
}

// WalkAfter is Walk starting after the entry (afterNS, afterKey), which need
// not exist: the entries Walk would visit after it, in the same order. It
// is how a paged listing resumes from its cursor without rescanning.
func (s *Badger) WalkAfter(ctx context.Context, ns, afterNS string, afterKey Key, fn func(Meta) bool) error {
	if err := checkNamespace("walk entries", afterNS); err != nil {
		return err
	}
	return s.walk(ctx, ns, metaKey(afterNS, afterKey), fn)
}

// walk is Walk from after (a metadata key; nil for the start).
func (s *Badger) walk(ctx context.Context, ns string, after []byte, fn func(Meta) bool) error {
	if ns != "" {
		if err := checkNamespace("walk entries", ns); err != nil {
			return err
		}
	}
	prefix := metaPrefix(ns)
	if after != nil && !bytes.HasPrefix(after, prefix) {
		if bytes.Compare(after, prefix) < 0 {
			after = nil // the cursor sorts before ns: start at its beginning
		} else {
			return nil // the cursor sorts after ns: nothing is left
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("walk entries: %w", err)
		}
		page, last, more, err := s.walkPage(prefix, after)
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("walk entries: %w", err)
			}
			if !fn(s.overlay(m)) {
				return nil
			}
		}
		if !more {
			return nil
		}
		after = last
	}
}

// walkPage reads up to walkPage entries under prefix with keys after after.
// It returns the last key it read and whether more keys follow.
func (s *Badger) walkPage(prefix, after []byte) (page []Meta, last []byte, more bool, err error) {
	page = make([]Meta, 0, walkPage)
	last, more, err = s.metaPage(prefix, after, walkPage, func(ref entryRef, item *badger.Item) {
		m, err := itemMeta(ref, item)
		if err != nil {
			s.log.Warn("skipping unreadable entry", "namespace", ref.ns, "key", ref.key.String(), "err", err)
			return
		}
		page = append(page, m)
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("walk entries: %w", err)
	}
	return page, last, more, nil
}
