package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Reported entries. A client that fetched an entry it could not load (the
// compiler's deserializer raised on bytes whose SHA-256 was right) reports
// it; after reports from enough distinct reporters, or one from an admin,
// the entry is quarantined: its metadata moves under the quarantine prefix
// (so Get, Stat, Walk and a Put's existence check miss it), but unlike a
// corrupt-chunk quarantine its blob is kept, referenced by the quarantined
// entry, so that an admin can restore it.
//
// Bounds: an entry keeps its last MaxReports reports and at most
// MaxReporters distinct reporters (so a threshold is at most MaxReporters).
// Quarantined entries count against Config.MaxBytes and are evicted, oldest
// quarantine first, only once every live entry has been.

// Quarantine causes, as stored and reported.
const (
	// CauseCorrupt is a quarantine by a chunk that failed its checksum; the
	// bytes are deleted and the entry cannot be restored.
	CauseCorrupt = "corrupt"
	// CauseReports is a quarantine by reports from enough distinct clients.
	CauseReports = "reports"
	// CauseAdmin is a quarantine by an admin (a report from an admin token
	// or an explicit Quarantine).
	CauseAdmin = "admin"
)

// causes indexes accounting.quarantines.
const (
	causeReports = iota
	causeAdmin
	numCauses
)

// Bounds of the reports kept per entry.
const (
	// MaxReports is how many reports an entry keeps (the most recent).
	MaxReports = 16
	// MaxReporters bounds the distinct reporters counted per entry, and so
	// the largest useful report threshold.
	MaxReporters = 64
	// MaxReasonLen bounds a report's or quarantine's reason, in bytes.
	MaxReasonLen = 256
	// MaxReporterLen bounds a reporter's identity, in bytes.
	MaxReporterLen = 256
)

// Report is one report that an entry failed to load.
type Report struct {
	// Time is when the store received it (set by Report).
	Time time.Time `json:"time"`
	// Reason is what the client saw, e.g. the deserializer's exception.
	Reason string `json:"reason"`
	// Reporter identifies the client (token name and client id); reports
	// from one reporter count once toward the threshold.
	Reporter string `json:"reporter"`
}

// ReportState is an entry's reports and quarantine state.
type ReportState struct {
	Namespace string
	Key       Key
	// Reports are the last MaxReports reports, oldest first.
	Reports []Report
	// Total counts the reports received since the entry was stored or
	// restored; Distinct the distinct reporters among them.
	Total    int64
	Distinct int
	// Quarantined is true while the entry is quarantined; QuarantinedAt,
	// Cause and Reason then describe the quarantine, and Restorable says
	// whether its bytes were kept.
	Quarantined   bool
	QuarantinedAt time.Time
	Cause         string
	Reason        string
	Restorable    bool
}

// Quarantined is one quarantined entry, as WalkQuarantined lists it.
type Quarantined struct {
	Meta          Meta
	QuarantinedAt time.Time
	Cause         string
	Reason        string
	// Restorable is true when the entry kept its bytes (not a corrupt-chunk
	// quarantine, and not since evicted or corrupted).
	Restorable bool
	// Reports counts the reports received before the quarantine.
	Reports int64
}

// reportsRecord is the stored form of an entry's reports.
type reportsRecord struct {
	Reports   []Report `json:"reports"`
	Total     int64    `json:"total"`
	Reporters []string `json:"reporters"`
}

// heldEntry is the accounting view of a quarantined entry that kept its blob.
type heldEntry struct {
	blob [32]byte
	at   time.Time
}

func reportKey(ns string, key Key) []byte { return entryKey(prefixReports, ns, key) }

func quarantineKey(ns string, key Key) []byte { return entryKey(prefixQuarantine, ns, key) }

// hold moves a live entry to the held set, keeping its blob reference (the
// blob moves to shared: a held entry has no slot to keep it inline).
func (a *accounting) hold(ref entryRef, at time.Time, cause int) {
	s, cell, ok := a.find(ref)
	if !ok {
		return
	}
	blob := a.slots.at(s).blob
	var size int64
	if b := a.sharedBlob(blob); b != nil {
		size = b.size
	}
	a.unlink(s, cell, size)
	a.held[ref] = heldEntry{blob: blob, at: at}
	a.quarantines[cause]++
}

// unhold moves a held entry back to the live entries as the most recently
// used.
func (a *accounting) unhold(ref entryRef, now time.Time) {
	h, ok := a.held[ref]
	if !ok {
		return
	}
	delete(a.held, ref)
	a.link(ref, h.blob, now, slotShared, 0)
}

// dropHeld forgets a held entry and reports whether its blob lost its last
// reference (its record and chunks must then be deleted).
func (a *accounting) dropHeld(ref entryRef) (blob [32]byte, freed, ok bool) {
	h, ok := a.held[ref]
	if !ok {
		return blob, false, false
	}
	delete(a.held, ref)
	b := a.shared[h.blob]
	if b == nil {
		return h.blob, false, true
	}
	b.refs--
	if b.refs <= 0 && b.pins <= 0 {
		delete(a.shared, h.blob)
		a.bytes -= b.size
		freed = true
	}
	return h.blob, freed, true
}

// oldestHeld returns the held entry quarantined first.
func (a *accounting) oldestHeld() (entryRef, bool) {
	var best entryRef
	var at time.Time
	found := false
	for ref, h := range a.held {
		if !found || h.at.Before(at) {
			best, at, found = ref, h.at, true
		}
	}
	return best, found
}

// loadHeld adds quarantined entries found on disk whose blob exists.
func (a *accounting) loadHeld(ref entryRef, blob [32]byte, size int64, at time.Time) {
	b := a.sharedBlob(blob)
	if b == nil {
		b = &acctBlob{size: size}
		a.shared[blob] = b
		a.bytes += size
	}
	b.refs++
	a.held[ref] = heldEntry{blob: blob, at: at}
}

// IsQuarantined reports whether (ns, key) is quarantined with its bytes
// kept. It does no I/O: a tier in front of a shared store asks it before
// fetching (and refilling) an entry this replica quarantined.
func (s *Badger) IsQuarantined(ns string, key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.acct.held[entryRef{ns, key}]
	return ok
}

// QuarantinedSHA256 returns the digest of the bytes the quarantined entry
// (ns, key) kept, and false when it is not quarantined with its bytes. It
// does no I/O: a tier in front of a shared store refuses a Put of those
// very bytes before it reaches the shared store.
func (s *Badger) QuarantinedSHA256(ns string, key Key) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.acct.held[entryRef{ns, key}]
	return h.blob, ok
}

// Report records that a client could not load the entry (ns, key). The
// entry is quarantined when admin is set or when threshold distinct
// reporters (1 to MaxReporters) have reported it. A report of an entry
// already quarantined changes nothing and returns its state.
//
// # Errors
//
//   - ErrInvalid: bad namespace, threshold, or a reason or reporter empty
//     or too long.
//   - ErrNotFound: no such entry, live or quarantined.
func (s *Badger) Report(ctx context.Context, ns string, key Key, r Report, threshold int, admin bool) (ReportState, error) {
	if err := checkNamespace("report entry", ns); err != nil {
		return ReportState{}, err
	}
	if threshold < 1 || threshold > MaxReporters {
		return ReportState{}, fmt.Errorf("report entry %s/%s: %w: threshold %d outside 1 to %d", ns, key, ErrInvalid, threshold, MaxReporters)
	}
	if err := checkText("reporter", r.Reporter, MaxReporterLen); err != nil {
		return ReportState{}, fmt.Errorf("report entry %s/%s: %w", ns, key, err)
	}
	ref := entryRef{ns, key}
	release, held, err := s.lockLive(ctx, "report entry", ref, r.Reason)
	if err != nil {
		return ReportState{}, err
	}
	defer release()
	if held {
		return s.reportState(ref)
	}
	r.Time = time.Now().UTC()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	rec, err := readReports(txn, ref)
	if err != nil {
		return ReportState{}, err
	}
	rec.add(r)
	b, err := json.Marshal(rec)
	if err != nil {
		return ReportState{}, fmt.Errorf("report entry %s/%s: encode reports: %w", ns, key, err)
	}
	if err := txn.Set(reportKey(ns, key), b); err != nil {
		return ReportState{}, fmt.Errorf("report entry %s/%s: %w", ns, key, err)
	}
	cause := ""
	switch {
	case admin:
		cause = CauseAdmin
	case len(rec.Reporters) >= threshold:
		cause = CauseReports
	}
	if cause != "" {
		if err := moveToQuarantine(txn, ref, cause, r.Reason, r.Time); err != nil {
			return ReportState{}, err
		}
	}
	if err := txn.Commit(); err != nil {
		return ReportState{}, fmt.Errorf("report entry %s/%s: commit: %w", ns, key, err)
	}
	if cause != "" {
		s.hotMeta.forget(ref) // hotmeta.go
	}
	s.log.Warn("entry reported as unloadable", "namespace", ns, "key", key.String(), "reporter", r.Reporter,
		"reason", r.Reason, "reports", rec.Total, "distinct_reporters", len(rec.Reporters), "threshold", threshold)
	if cause != "" {
		s.held(ref, r.Time, cause)
	}
	return s.reportState(ref)
}

// lockLive starts a report or quarantine of ref (operation op): it checks
// reason and ctx, enters for writing and takes wmu, and reports whether ref
// is held (quarantined with its bytes already). A ref neither held nor live
// is ErrNotFound. On success the caller must call release.
func (s *Badger) lockLive(ctx context.Context, op string, ref entryRef, reason string) (release func(), held bool, err error) {
	if err := checkText("reason", reason, MaxReasonLen); err != nil {
		return nil, false, fmt.Errorf("%s %s/%s: %w", op, ref.ns, ref.key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("%s %s/%s: %w", op, ref.ns, ref.key, err)
	}
	if err := s.enterWrite(); err != nil {
		return nil, false, err
	}
	s.wmu.Lock()
	release = func() {
		s.wmu.Unlock()
		s.leaveWrite()
	}
	s.mu.Lock()
	_, held = s.acct.held[ref]
	live := s.acct.has(ref)
	s.mu.Unlock()
	if !held && !live {
		release()
		return nil, false, fmt.Errorf("%s %s/%s: %w", op, ref.ns, ref.key, ErrNotFound)
	}
	return release, held, nil
}

// held records in the accounting that ref was quarantined at t, and logs it.
func (s *Badger) held(ref entryRef, t time.Time, cause string) {
	idx := causeReports
	if cause == CauseAdmin {
		idx = causeAdmin
	}
	s.mu.Lock()
	sha, _, live := s.acct.lookup(ref)
	s.acct.hold(ref, t, idx)
	s.mu.Unlock()
	if live {
		s.hot.drop(sha) // no longer served: its bytes need not stay in memory
	}
	s.log.Error("entry quarantined: clients could not load it; it is no longer served (restore it with POST .../restore)",
		"namespace", ref.ns, "key", ref.key.String(), "cause", cause)
	s.notifyQuarantined(ref)
}

// notifyQuarantined calls Config.OnQuarantine for ref, quarantined now.
func (s *Badger) notifyQuarantined(ref entryRef) {
	if s.cfg.OnQuarantine != nil {
		s.cfg.OnQuarantine(ref.ns, ref.key)
	}
}

// Quarantine quarantines the entry (ns, key) now (cause CauseAdmin). An
// entry already quarantined is left as it is. A miss returns ErrNotFound.
func (s *Badger) Quarantine(ctx context.Context, ns string, key Key, reason string) (ReportState, error) {
	if err := checkNamespace("quarantine entry", ns); err != nil {
		return ReportState{}, err
	}
	ref := entryRef{ns, key}
	release, held, err := s.lockLive(ctx, "quarantine entry", ref, reason)
	if err != nil {
		return ReportState{}, err
	}
	defer release()
	if held {
		return s.reportState(ref)
	}
	now := time.Now().UTC()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := moveToQuarantine(txn, ref, CauseAdmin, reason, now); err != nil {
		return ReportState{}, err
	}
	if err := txn.Commit(); err != nil {
		return ReportState{}, fmt.Errorf("quarantine entry %s/%s: commit: %w", ns, key, err)
	}
	s.hotMeta.forget(ref) // hotmeta.go
	s.held(ref, now, CauseAdmin)
	return s.reportState(ref)
}

// moveToQuarantine moves ref's metadata under the quarantine prefix, its blob
// kept, in txn.
func moveToQuarantine(txn *badger.Txn, ref entryRef, cause, reason string, at time.Time) error {
	item, err := txn.Get(metaKey(ref.ns, ref.key))
	if err != nil {
		return fmt.Errorf("quarantine entry %s/%s: read metadata: %w", ref.ns, ref.key, err)
	}
	m, err := itemMeta(ref, item)
	if err != nil {
		return fmt.Errorf("quarantine entry: %w", err)
	}
	rec := metaRecord{Meta: m, SHA256: hex.EncodeToString(m.SHA256[:]), Reason: reason, QuarantinedAt: at, Cause: cause, Kept: true}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("quarantine entry %s/%s: encode: %w", ref.ns, ref.key, err)
	}
	if err := txn.Set(quarantineKey(ref.ns, ref.key), b); err != nil {
		return fmt.Errorf("quarantine entry %s/%s: %w", ref.ns, ref.key, err)
	}
	if err := txn.Delete(metaKey(ref.ns, ref.key)); err != nil {
		return fmt.Errorf("quarantine entry %s/%s: %w", ref.ns, ref.key, err)
	}
	return nil
}

// Restore serves a quarantined entry again, its reports cleared, and
// returns its metadata. ErrNotFound when the entry is not quarantined, or
// was quarantined without its bytes (a corrupt chunk: the message says so).
func (s *Badger) Restore(ctx context.Context, ns string, key Key) (Meta, error) {
	if err := checkNamespace("restore entry", ns); err != nil {
		return Meta{}, err
	}
	if err := ctx.Err(); err != nil {
		return Meta{}, fmt.Errorf("restore entry %s/%s: %w", ns, key, err)
	}
	ref := entryRef{ns, key}
	if err := s.enterWrite(); err != nil {
		return Meta{}, err
	}
	defer s.leaveWrite()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	q, err := readQuarantined(txn, ref)
	if errors.Is(err, ErrNotFound) {
		return Meta{}, fmt.Errorf("restore entry %s/%s: the entry is not quarantined: %w", ns, key, err)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("restore entry %s/%s: %w", ns, key, err)
	}
	s.mu.Lock()
	_, held := s.acct.held[ref]
	s.mu.Unlock()
	if !held {
		return Meta{}, fmt.Errorf("restore entry %s/%s: quarantined (%s) without its bytes, which were deleted; the writer must store it again: %w",
			ns, key, q.Cause, ErrNotFound)
	}
	m := q.Meta
	m.LastAccess = time.Now().UTC()
	b, err := encodeMeta(m)
	if err != nil {
		return Meta{}, err
	}
	for _, op := range []error{
		txn.Set(metaKey(ns, key), b),
		txn.Delete(quarantineKey(ns, key)),
		txn.Delete(reportKey(ns, key)),
	} {
		if op != nil {
			return Meta{}, fmt.Errorf("restore entry %s/%s: %w", ns, key, op)
		}
	}
	if err := txn.Commit(); err != nil {
		return Meta{}, fmt.Errorf("restore entry %s/%s: commit: %w", ns, key, err)
	}
	s.hotMeta.forget(ref) // hotmeta.go
	s.mu.Lock()
	s.acct.unhold(ref, m.LastAccess)
	s.mu.Unlock()
	s.log.Warn("quarantined entry restored", "namespace", ns, "key", key.String())
	return m, nil
}

// Reports returns the entry's reports and quarantine state. ErrNotFound
// when the entry is neither live nor quarantined.
func (s *Badger) Reports(ctx context.Context, ns string, key Key) (ReportState, error) {
	if err := checkNamespace("read reports", ns); err != nil {
		return ReportState{}, err
	}
	if err := ctx.Err(); err != nil {
		return ReportState{}, fmt.Errorf("read reports of %s/%s: %w", ns, key, err)
	}
	if err := s.enter(); err != nil {
		return ReportState{}, err
	}
	defer s.leave()
	return s.reportState(entryRef{ns, key})
}

// reportState reads ref's reports and quarantine record. The caller holds
// closeMu shared.
func (s *Badger) reportState(ref entryRef) (ReportState, error) {
	st := ReportState{Namespace: ref.ns, Key: ref.key}
	err := s.db.View(func(txn *badger.Txn) error {
		rec, err := readReports(txn, ref)
		if err != nil {
			return err
		}
		st.Reports, st.Total, st.Distinct = rec.Reports, rec.Total, len(rec.Reporters)
		q, err := readQuarantined(txn, ref)
		if err == nil {
			st.Quarantined, st.QuarantinedAt, st.Cause, st.Reason = true, q.QuarantinedAt, q.Cause, q.Reason
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		_, err = txn.Get(metaKey(ref.ns, ref.key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("read reports of %s/%s: %w", ref.ns, ref.key, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return ReportState{}, err
	}
	if st.Quarantined {
		s.mu.Lock()
		_, st.Restorable = s.acct.held[ref]
		s.mu.Unlock()
	}
	return st, nil
}

// readReports reads ref's reports record; none gives an empty record.
func readReports(txn *badger.Txn, ref entryRef) (reportsRecord, error) {
	var rec reportsRecord
	item, err := txn.Get(reportKey(ref.ns, ref.key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return rec, nil
	}
	if err == nil {
		err = item.Value(func(v []byte) error { return json.Unmarshal(v, &rec) })
	}
	if err != nil {
		return rec, fmt.Errorf("read reports of %s/%s: %w", ref.ns, ref.key, err)
	}
	return rec, nil
}

// add appends r, keeping the last MaxReports reports and at most
// MaxReporters distinct reporters.
func (rec *reportsRecord) add(r Report) {
	rec.Total++
	rec.Reports = append(rec.Reports, r)
	if n := len(rec.Reports); n > MaxReports {
		rec.Reports = append(rec.Reports[:0], rec.Reports[n-MaxReports:]...)
	}
	for _, who := range rec.Reporters {
		if who == r.Reporter {
			return
		}
	}
	if len(rec.Reporters) < MaxReporters {
		rec.Reporters = append(rec.Reporters, r.Reporter)
	}
}

// checkText checks that a reason or reporter is set and at most max bytes.
func checkText(what, v string, max int) error {
	if v == "" {
		return fmt.Errorf("%w: %s is required", ErrInvalid, what)
	}
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrInvalid, what, len(v), max)
	}
	return nil
}
