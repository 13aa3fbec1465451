package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// Quarantine in a fleet: reports, quarantine and restore go to the hot tier
// (Badger), which counts the reports and keeps the quarantined entry's
// bytes; a replica that quarantined an entry neither serves it nor fetches
// it again from the shared tier. When the hot tier quarantines it, the
// shared tier is asked to quarantine it too (sharedQuarantiner: its record
// moves aside, its blob stays), so that no replica fetches it from the
// bucket any more and a writer's next Put (different bytes) can store the
// key afresh; replicas that hold it in their own hot tier serve it until
// their own clients report it. Restore moves both back. A report of an
// entry that only the shared tier holds first copies it into the hot tier.

// quarantiner is what quarantine needs of the hot tier (*store.Badger).
type quarantiner interface {
	Report(ctx context.Context, ns string, key store.Key, r store.Report, threshold int, admin bool) (store.ReportState, error)
	Reports(ctx context.Context, ns string, key store.Key) (store.ReportState, error)
	Quarantine(ctx context.Context, ns string, key store.Key, reason string) (store.ReportState, error)
	Restore(ctx context.Context, ns string, key store.Key) (store.Meta, error)
	WalkQuarantined(ctx context.Context, ns string, after *store.Key, fn func(store.Quarantined) bool) error
	IsQuarantined(ns string, key store.Key) bool
}

// sharedQuarantiner is what quarantine asks of the shared tier (*s3.Store).
type sharedQuarantiner interface {
	Quarantine(ctx context.Context, ns string, key store.Key) error
	Restore(ctx context.Context, ns string, key store.Key) error
}

// sharedQuarantineTimeout bounds the shared-tier half of a quarantine or
// restore (the hot tier's decision stands either way).
const sharedQuarantineTimeout = 30 * time.Second

var errNoQuarantine = errors.New("the hot tier cannot quarantine entries")

// quarantineShared quarantines (ns, key) in the shared tier once the hot
// tier has; a failure is logged, not returned: this replica stopped serving
// the entry, and an admin can retry with POST .../quarantine.
func (s *Store) quarantineShared(ns string, key store.Key) {
	sq, ok := s.shared.(sharedQuarantiner)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, sharedQuarantineTimeout)
	defer cancel()
	err := sq.Quarantine(ctx, ns, key)
	s.observe(err)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("quarantine in the shared tier failed; other replicas may still fetch the entry from it",
			"namespace", ns, "key", key.String(), "err", err)
	}
}

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

// heldSHA256 is the hot tier's QuarantinedSHA256, if it has one.
type heldSHA256 interface {
	QuarantinedSHA256(ns string, key store.Key) ([32]byte, bool)
}

// refuseQuarantined returns store.ErrQuarantined for a Put that declares the
// very bytes this replica quarantined under the key, before the shared tier
// (whose record was moved aside) would store them again.
func (s *Store) refuseQuarantined(ns string, key store.Key, opts store.PutOptions) error {
	h, ok := s.hot.(heldSHA256)
	if !ok || opts.SHA256 == nil {
		return nil
	}
	if sha, held := h.QuarantinedSHA256(ns, key); held && sha == *opts.SHA256 {
		return fmt.Errorf("put entry %s/%s: these bytes were quarantined (clients reported that they cannot load them); store different bytes, or ask an admin to restore the entry: %w",
			ns, key, store.ErrQuarantined)
	}
	return nil
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
	was := q.IsQuarantined(ns, key)
	st, err := q.Report(ctx, ns, key, r, threshold, admin)
	if err == nil && st.Quarantined && !was {
		s.quarantineShared(ns, key)
	}
	return st, err
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
	st, err := q.Quarantine(ctx, ns, key, reason)
	if err == nil {
		s.quarantineShared(ns, key) // again if it failed before: the admin's retry
	}
	return st, err
}

// Restore restores the entry in the hot tier.
func (s *Store) Restore(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	q, err := s.hotQ()
	if err != nil {
		return store.Meta{}, err
	}
	m, err := q.Restore(ctx, ns, key)
	if err != nil {
		return m, err
	}
	if sq, ok := s.shared.(sharedQuarantiner); ok {
		sctx, cancel := context.WithTimeout(ctx, sharedQuarantineTimeout)
		defer cancel()
		serr := sq.Restore(sctx, ns, key)
		s.observe(serr)
		if serr != nil && !errors.Is(serr, store.ErrNotFound) {
			return m, fmt.Errorf("restore entry %s/%s: restored on this replica, but not in the shared tier: %w", ns, key, serr)
		}
	}
	return m, nil
}

// WalkQuarantined lists the hot tier's quarantined entries.
func (s *Store) WalkQuarantined(ctx context.Context, ns string, after *store.Key, fn func(store.Quarantined) bool) error {
	q, err := s.hotQ()
	if err != nil {
		return err
	}
	return q.WalkQuarantined(ctx, ns, after, fn)
}
