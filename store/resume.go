package store

import (
	"bytes"
	"context"
)

// AfterWalker is a store that resumes a walk from a cursor without
// rescanning (*Badger, the S3 and tiered stores).
type AfterWalker interface {
	WalkAfter(ctx context.Context, ns, afterNS string, afterKey Key, fn func(Meta) bool) error
}

// walker is what WalkAfter needs of a store without AfterWalker.
type walker interface {
	Walk(ctx context.Context, ns string, fn func(Meta) bool) error
}

// WalkAfter walks the entries of ns ("" for all) that Walk visits after the
// entry (afterNS, afterKey), which need not exist: through s's own
// WalkAfter when it is an AfterWalker, else by walking from the start and
// skipping to the cursor (namespace, then key order, as Walk visits them).
func WalkAfter(ctx context.Context, s walker, ns, afterNS string, afterKey Key, fn func(Meta) bool) error {
	if w, ok := s.(AfterWalker); ok {
		return w.WalkAfter(ctx, ns, afterNS, afterKey, fn)
	}
	if err := CheckNamespace("walk entries", afterNS); err != nil {
		return err
	}
	return s.Walk(ctx, ns, func(m Meta) bool {
		if m.Namespace < afterNS || m.Namespace == afterNS && bytes.Compare(m.Key[:], afterKey[:]) <= 0 {
			return true
		}
		return fn(m)
	})
}
