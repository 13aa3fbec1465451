package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Expiry and quota enforcement in the background.
//
// A Put into a namespace at its quota evicts the namespace's own least
// recently used entries (reserve.go). What no Put triggers runs in the
// expiry loop, every Config.ExpiryInterval, in passes of bounded work:
// across every namespace, at most Config.ExpiryBatch entries removed and
// metadata records read per pass (besides one in-memory look at the LRU
// tail of each namespace with a quota or expiry), in this order:
//
//  1. Namespaces over their quota (it was lowered by SetQuotas, or at Open):
//     their least recently used entries are evicted (reason quota) until
//     they fit.
//  2. Namespaces with MaxIdle: their LRU tails are expired (reason idle)
//     while the tail's last access is older than MaxIdle. The LRU list is
//     ordered by last access, so this is exact: the first tail that is not
//     idle ends the namespace's turn.
//  3. Namespaces with MaxAge: their metadata records are read in key order
//     from a cursor kept per namespace, and entries stored longer ago than
//     MaxAge are expired (reason age). The creation time is not kept in
//     memory (that would cost every entry 8 bytes more), so a namespace of
//     N entries is scanned in full every N/ExpiryBatch passes or so (the
//     namespaces with MaxAge share what steps 1 and 2 left of the budget):
//     an entry is expired about MaxAge + (N/ExpiryBatch+1)×ExpiryInterval
//     after it was stored at the latest.
//
// Namespaces take their turn in a rotating order, so one with a large
// backlog does not starve the others. A pass whose steps 1 and 2 ran out
// of budget while still removing entries (a backlog) is followed by
// another at once; removals take the write lock one entry at a time, so
// Puts and Gets go on in between.

// expiryState is the expiry loop's own state.
type expiryState struct {
	// mu serializes passes (the loop's and ExpireNow's).
	mu sync.Mutex
	// turn rotates the order in which namespaces take their turn.
	turn int
}

// expiryPlan is one namespace's work in a pass.
type expiryPlan struct {
	name  string
	quota Quota
	over  bool
}

// passResult counts what a pass removed, by namespace and reason.
type passResult struct {
	removed map[string]*[numReasons]int64
	// more is true when the pass ran out of budget with a backlog left.
	more bool
}

func (r *passResult) count(ns string, reason evictReason) {
	if r.removed == nil {
		r.removed = make(map[string]*[numReasons]int64)
	}
	c := r.removed[ns]
	if c == nil {
		c = new([numReasons]int64)
		r.removed[ns] = c
	}
	c[reason]++
}

// total returns the entries the pass removed.
func (r *passResult) total() int64 {
	var n int64
	for _, c := range r.removed {
		for _, v := range c {
			n += v
		}
	}
	return n
}

// SetQuotas puts q in force at once for every Put, and kicks the expiry
// loop, which evicts namespaces now over their quota and expires what the
// new MaxIdle and MaxAge make old, in bounded passes. It returns an error
// wrapping ErrInvalid, and changes nothing, when q names an invalid
// namespace or has a negative bound.
func (s *Badger) SetQuotas(q Quotas) error {
	if err := q.validate(); err != nil {
		return fmt.Errorf("set quotas: %w", err)
	}
	s.mu.Lock()
	s.acct.setQuotas(q.clone())
	s.mu.Unlock()
	s.kickExpiry()
	return nil
}

// Quotas returns the quotas in force.
func (s *Badger) Quotas() Quotas {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acct.quotas.clone()
}

// NamespaceUsage returns namespace ns's usage against its quota: zero
// entries and bytes, with the quota that would apply, for a namespace the
// store holds nothing of.
func (s *Badger) NamespaceUsage(ns string) NamespaceUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acct.nsUsageOf(ns)
}

// kickExpiry asks the expiry loop for a pass now; it never blocks.
func (s *Badger) kickExpiry() {
	select {
	case s.expiryKick <- struct{}{}:
	default:
	}
}

// expiryLoop runs a pass at once (quotas may be lower than at the last
// Open), then every Config.ExpiryInterval and whenever kicked.
func (s *Badger) expiryLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ExpiryInterval)
	defer t.Stop()
	s.kickExpiry()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.expiryKick:
		}
		if r := s.expirePass(time.Now()); r.more {
			s.kickExpiry()
		}
	}
}

// expirePass runs one pass as of now (see the comment at the top of the
// file).
func (s *Badger) expirePass(now time.Time) passResult {
	s.expiry.mu.Lock()
	defer s.expiry.mu.Unlock()
	var res passResult
	if err := s.writable(); err != nil {
		// Every eviction would fail alike, each with a line of its own.
		s.skipWrite("expiry pass", "idle and over-quota entries are evicted once it is", err)
		return res
	}
	plan := s.expiryPlans()
	if len(plan) == 0 {
		return res
	}
	s.expiry.turn++
	k := s.expiry.turn % len(plan)
	plan = append(plan[k:], plan[:k]...)
	budget := s.cfg.ExpiryBatch
	var cut bool
	for _, p := range plan {
		if p.over && budget > 0 {
			budget, cut = s.evictTails(p.name, evictQuota, budget, &res, func(n *nsAcct, _ acctEntry) bool { return n.overQuota() })
			res.more = res.more || cut
		}
	}
	for _, p := range plan {
		if p.quota.MaxIdle > 0 && budget > 0 {
			cutoff := now.Add(-p.quota.MaxIdle)
			budget, cut = s.evictTails(p.name, evictIdle, budget, &res, func(_ *nsAcct, e acctEntry) bool { return e.atime.Before(cutoff) })
			res.more = res.more || cut
		}
	}
	for _, p := range plan {
		if p.quota.MaxAge > 0 && budget > 0 {
			budget = s.expireAged(p.name, now.Add(-p.quota.MaxAge), budget, &res)
		}
	}
	s.logPass(res)
	return res
}

// expiryPlans returns the namespaces a pass has work for, by name.
func (s *Badger) expiryPlans() []expiryPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var plan []expiryPlan
	for name, n := range s.acct.ns {
		if n.count == 0 {
			continue
		}
		q := n.quota
		if over := n.overQuota(); over || q.MaxIdle > 0 || q.MaxAge > 0 {
			plan = append(plan, expiryPlan{name: name, quota: q, over: over})
		}
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].name < plan[j].name })
	return plan
}

// evictTails removes namespace ns's least recently used entry for reason
// while cond holds for the namespace and that entry, at most budget times.
// Only removals cost budget (a look at the tail is an in-memory check); it
// returns the budget left and whether it ran out while entries were still
// being removed (a backlog).
func (s *Badger) evictTails(ns string, reason evictReason, budget int, res *passResult, cond func(*nsAcct, acctEntry) bool) (left int, cut bool) {
	for budget > 0 {
		ok, err := s.evictIf(reason, func() (entryRef, bool) {
			s.mu.Lock()
			defer s.mu.Unlock()
			n := s.acct.ns[ns]
			if n == nil {
				return entryRef{}, false
			}
			e, ok := s.acct.tail(n)
			if !ok || !cond(n, e) {
				return entryRef{}, false
			}
			return e.ref, true
		})
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				s.log.Warn("expiry: evict entry failed; the next pass retries", "namespace", ns, "reason", reason.String(), "err", err)
			}
			return budget, false
		}
		if !ok {
			return budget, false
		}
		budget--
		res.count(ns, reason)
	}
	return 0, true
}

// expireAged reads up to budget metadata records of namespace ns from its
// age cursor and expires the entries created before cutoff; it returns the
// budget left.
func (s *Badger) expireAged(ns string, cutoff time.Time, budget int, res *passResult) int {
	s.mu.Lock()
	var after []byte
	if n := s.acct.ns[ns]; n != nil {
		after = n.ageCursor
	}
	s.mu.Unlock()
	aged, read, last, more, err := s.agedPage(metaPrefix(ns), after, budget, cutoff)
	if err != nil {
		if !errors.Is(err, ErrClosed) {
			s.log.Warn("expiry: scan entries failed; the next pass retries", "namespace", ns, "err", err)
		}
		return 0
	}
	budget -= max(read, 1) // at least one: a page of nothing still cost a read
	if !more {
		last = nil // the next pass starts the namespace over
	}
	s.mu.Lock()
	if n := s.acct.ns[ns]; n != nil {
		n.ageCursor = last
	}
	s.mu.Unlock()
	for _, p := range aged {
		if !p.old {
			continue
		}
		ref := p.ref
		ok, err := s.evictIf(evictAge, func() (entryRef, bool) {
			// Read again under the write lock: the entry may have been
			// deleted and stored anew since the page was read.
			m, err := s.statLocked(ref)
			return ref, err == nil && m.Created.Before(cutoff)
		})
		if errors.Is(err, ErrClosed) {
			return 0
		}
		if err != nil {
			s.log.Warn("expiry: evict entry failed; the next pass retries", "namespace", ns, "key", ref.key.String(), "err", err)
			continue
		}
		if ok {
			res.count(ns, evictAge)
		}
	}
	return budget
}

// evictIf takes the write lock, asks pick for an entry and evicts it for
// reason; it reports whether it evicted one. pick runs under wmu (not mu).
func (s *Badger) evictIf(reason evictReason, pick func() (entryRef, bool)) (bool, error) {
	if err := s.enterWrite(); err != nil {
		return false, err
	}
	s.wmu.Lock()
	ref, ok := pick()
	var purge func()
	var e evicted
	var err error
	if ok {
		purge, e, err = s.evictLocked(ref, reason)
	}
	s.wmu.Unlock()
	s.leaveWrite()
	if !ok || err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil // deleted meanwhile
		}
		return false, err
	}
	purge()
	s.notifyEvicted([]evicted{e})
	return true, nil
}

// statLocked reads an entry's stored metadata; the caller holds wmu.
func (s *Badger) statLocked(ref entryRef) (Meta, error) {
	var m Meta
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		m, err = s.readMeta(txn, ref)
		return err
	})
	return m, err
}

// agedEntry is an entry of an age scan page.
type agedEntry struct {
	ref entryRef
	old bool // created before the cutoff
}

// agedPage reads up to limit metadata records under prefix with keys
// after after, and reports for each whether it was created before cutoff.
// It decodes only the creation time. It returns the records it read
// (unreadable ones too), the last key and whether more keys follow.
func (s *Badger) agedPage(prefix, after []byte, limit int, cutoff time.Time) (page []agedEntry, read int, last []byte, more bool, err error) {
	last, more, err = s.metaPage(prefix, after, limit, func(ref entryRef, item *badger.Item) {
		read++
		var rec struct {
			Meta struct {
				Created time.Time `json:"created"`
			} `json:"meta"`
		}
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &rec) }); err != nil {
			s.log.Warn("expiry: skipping unreadable entry", "namespace", ref.ns, "key", ref.key.String(), "err", err)
			return
		}
		page = append(page, agedEntry{ref: ref, old: rec.Meta.Created.Before(cutoff)})
	})
	if err != nil {
		return nil, 0, nil, false, fmt.Errorf("scan entries for expiry: %w", err)
	}
	return page, read, last, more, nil
}

// logPass logs what a pass removed, one line per namespace and reason.
func (s *Badger) logPass(res passResult) {
	for ns, c := range res.removed {
		for r, n := range c {
			if n == 0 {
				continue
			}
			msg := "entries expired"
			if !evictReason(r).expiry() {
				msg = "entries evicted over the namespace's quota"
			}
			s.log.Info(msg, "namespace", ns, "reason", evictReason(r).String(), "entries", n)
		}
	}
}
