package tiered

import (
	"context"
	"errors"
	"fmt"

	"github.com/cachesvc/cachesvc/store"
)

// Quarantine in a fleet is per replica: reports, quarantine and restore go
// to the hot tier (Badger), which keeps the quarantined entry's bytes; a
// replica that quarantined an entry neither serves it nor fetches it again
// from the shared tier, which keeps its copy (so other replicas still serve
// it until their own clients report it). A report of an entry that only
// the shared tier holds first copies it into the hot tier.

// quarantiner is what quarantine needs of the hot tier (*store.Badger).
type quarantiner interface {
	Report(ctx context.Context, ns string, key store.Key, r store.Report, threshold int, admin bool) (store.ReportState, error)
	Reports(ctx context.Context, ns string, key store.Key) (store.ReportState, error)
	Quarantine(ctx context.Context, ns string, key store.Key, reason string) (store.ReportState, error)
	Restore(ctx context.Context, ns string, key store.Key) (store.Meta, error)
	WalkQuarantined(ctx context.Context, ns string, after *store.Key, fn func(store.Quarantined) bool) error
	IsQuarantined(ns string, key store.Key) bool
}

var errNoQuarantine = errors.New("the hot tier cannot quarantine entries")

// hotQ returns the hot tier's quarantine, or an error when it has none.
func (s *Store) hotQ() (quarantiner, error) {
	q, ok := s.hot.(quarantiner)
	if !ok {
		return nil, errNoQuarantine
	}
	return q, nil
}

// quarantined reports whether this replica quarantined (ns, key).
func (s *Store) quarantined(ns string, key store.Key) bool {
	q, ok := s.hot.(quarantiner)
	return ok && q.IsQuarantined(ns, key)
}

// IsQuarantined reports whether this replica quarantined (ns, key).
func (s *Store) IsQuarantined(ns string, key store.Key) bool { return s.quarantined(ns, key) }

// promote copies (ns, key) from the shared tier into the hot tier when the
// hot tier has neither it nor its quarantine, so that it can be reported
// or quarantined here. The copy streams and is verified by the hot Put.
func (s *Store) promote(ctx context.Context, q quarantiner, ns string, key store.Key) error {
	if _, err := s.hot.Stat(ctx, ns, key); err == nil || !errors.Is(err, store.ErrNotFound) || q.IsQuarantined(ns, key) {
		return nil
	}
	m, rc, err := s.shared.Get(ctx, ns, key, 0, -1)
	s.observe(err)
	if err != nil {
		return err
	}
	defer rc.Close()
	sha := m.SHA256
	_, err = s.hot.Put(ctx, ns, key, rc, store.PutOptions{SHA256: &sha, Size: m.Size, Backend: m.Backend, Name: m.Name,
		CompileSeconds: m.CompileSeconds, Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components})
	if err != nil {
		return fmt.Errorf("copy entry %s/%s into the hot tier: %w", ns, key, err)
	}
	return nil
}

// Report records a report with the hot tier (see store.Badger.Report).
func (s *Store) Report(ctx context.Context, ns string, key store.Key, r store.Report, threshold int, admin bool) (store.ReportState, error) {
	q, err := s.hotQ()
	if err != nil {
		return store.ReportState{}, err
	}
	if err := s.promote(ctx, q, ns, key); err != nil {
		return store.ReportState{}, err
	}
	return q.Report(ctx, ns, key, r, threshold, admin)
}

// Reports returns the hot tier's reports of the entry.
func (s *Store) Reports(ctx context.Context, ns string, key store.Key) (store.ReportState, error) {
	q, err := s.hotQ()
	if err != nil {
		return store.ReportState{}, err
	}
	return q.Reports(ctx, ns, key)
}

// Quarantine quarantines the entry in the hot tier, copying it there first
// when only the shared tier has it.
func (s *Store) Quarantine(ctx context.Context, ns string, key store.Key, reason string) (store.ReportState, error) {
	q, err := s.hotQ()
	if err != nil {
		return store.ReportState{}, err
	}
	if err := s.promote(ctx, q, ns, key); err != nil {
		return store.ReportState{}, err
	}
	return q.Quarantine(ctx, ns, key, reason)
}

// Restore restores the entry in the hot tier.
func (s *Store) Restore(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	q, err := s.hotQ()
	if err != nil {
		return store.Meta{}, err
	}
	return q.Restore(ctx, ns, key)
}

// WalkQuarantined lists the hot tier's quarantined entries.
func (s *Store) WalkQuarantined(ctx context.Context, ns string, after *store.Key, fn func(store.Quarantined) bool) error {
	q, err := s.hotQ()
	if err != nil {
		return err
	}
	return q.WalkQuarantined(ctx, ns, after, fn)
}
