package store

import (
	"fmt"
	"math"
	"sort"

	"github.com/cachesvc/cachesvc/wire"
)

// NamespaceUsage is one namespace's usage against its quota, in the form
// the API reports it (wire.NamespaceUsage).
type NamespaceUsage = wire.NamespaceUsage

// maxNamespaceRecords is how many namespace records the accounting keeps
// before it forgets the forgettable ones: empty, not listed in the quotas
// and with no upload in flight (their eviction counts go with them). A
// namespace with entries is never forgotten, so the records are bounded by
// the entries plus the namespaces the quotas list plus this.
const maxNamespaceRecords = 1024

// nsAcct is the accounting of one namespace: the ends of its entries' LRU
// list (threaded through the entry slots; an entry is on no other list),
// the sum of their sizes, what uploads in flight into it hold, its quota and
// its eviction counts.
type nsAcct struct {
	name  string
	id    uint32 // in entry slots and accounting.nsByID
	idx   int    // in accounting.nsList and tails
	quota Quota
	// head and tailSlot are the slots (slab.go) at the ends of the LRU
	// list, most recently used at head (nilSlot when empty); count is its
	// length.
	head, tailSlot uint32
	count          int
	// bytes sums the sizes of the namespace's entries: a blob shared with
	// another namespace counts in each.
	bytes int64
	// reserved and reservedEntries are held by uploads in flight into the
	// namespace, until they commit or fail.
	reserved        int64
	reservedEntries int64
	evicted         [numReasons]int64
	// ageCursor is the metadata key after which the next max_age scan of
	// the namespace starts (expiry.go); nil starts from its first entry.
	ageCursor []byte
}

// overQuota reports whether the namespace holds more than its quota allows
// (after a quota was lowered).
func (n *nsAcct) overQuota() bool {
	q := n.quota
	return q.MaxBytes > 0 && n.bytes > q.MaxBytes || q.MaxEntries > 0 && int64(n.count) > q.MaxEntries
}

// fits reports whether a claim fits under the namespace's quota now,
// counting what uploads in flight hold.
func (n *nsAcct) fits(c claim) bool {
	q := n.quota
	if q.MaxBytes > 0 && n.bytes+n.reserved+c.nsBytes > q.MaxBytes {
		return false
	}
	return q.MaxEntries <= 0 || !c.entry || int64(n.count)+n.reservedEntries+1 <= q.MaxEntries
}

// impossible returns the *QuotaError of a claim that cannot fit even after
// evicting every entry of the namespace, or nil.
func (n *nsAcct) impossible(c claim) error {
	q := n.quota
	if q.MaxBytes > 0 {
		need, others := c.held+c.nsBytes, n.reserved-c.held
		if need > q.MaxBytes || others+need > q.MaxBytes {
			return &QuotaError{Namespace: n.name, Limit: "max_bytes", Quota: q.MaxBytes, Need: need, InFlight: others}
		}
	}
	if q.MaxEntries > 0 && c.entry && n.reservedEntries+1 > q.MaxEntries {
		return &QuotaError{Namespace: n.name, Limit: "max_entries", Quota: q.MaxEntries, Need: 1, InFlight: n.reservedEntries}
	}
	return nil
}

// usage returns the namespace's usage against its quota.
func (n *nsAcct) usage() NamespaceUsage {
	u := NamespaceUsage{
		Namespace:      n.name,
		Entries:        int64(n.count),
		Bytes:          n.bytes,
		MaxBytes:       n.quota.MaxBytes,
		MaxEntries:     n.quota.MaxEntries,
		MaxIdleSeconds: n.quota.MaxIdle.Seconds(),
		MaxAgeSeconds:  n.quota.MaxAge.Seconds(),
	}
	for r, c := range n.evicted {
		if c == 0 {
			continue
		}
		if evictReason(r).expiry() {
			u.Expirations += c
		} else {
			u.Evictions += c
		}
		if u.EvictionsByReason == nil {
			u.EvictionsByReason = make(map[string]int64, numReasons)
		}
		u.EvictionsByReason[evictReason(r).String()] = c
	}
	return u
}

// claim is what one reservation asks of the accounting for an upload into
// namespace ns (empty: none, as when the store evicts down to MaxBytes at
// Open).
type claim struct {
	ns string
	// bytes are new blob bytes, against Config.MaxBytes.
	bytes int64
	// nsBytes are entry bytes, against the namespace's MaxBytes.
	nsBytes int64
	// entry asks for one entry against the namespace's MaxEntries.
	entry bool
	// held is what the upload already holds against the namespace's
	// MaxBytes (earlier chunks), for the error's arithmetic.
	held int64
}

// add accumulates o into c (the upload's total hold).
func (c *claim) add(o claim) {
	c.bytes += o.bytes
	c.nsBytes += o.nsBytes
	c.entry = c.entry || o.entry
}

// zero reports whether the claim holds nothing.
func (c claim) zero() bool { return c.bytes == 0 && c.nsBytes == 0 && !c.entry }

// emptyTail is the tail time of a namespace with no entries.
const emptyTail = math.MaxInt64

// tailMoved records that namespace n's LRU tail changed (or its access
// time did).
func (a *accounting) tailMoved(n *nsAcct) {
	a.tails[n.idx] = emptyTail
	if n.tailSlot != nilSlot {
		a.tails[n.idx] = a.slots.at(n.tailSlot).atime
	}
}

// tail returns a copy of namespace n's least recently used entry.
func (a *accounting) tail(n *nsAcct) (acctEntry, bool) {
	if n.tailSlot == nilSlot {
		return acctEntry{}, false
	}
	e := a.slots.at(n.tailSlot)
	return acctEntry{ref: entryRef{n.name, e.key}, blob: e.blob, atime: fromNano(e.atime)}, true
}

// nsOf returns namespace ns's record, creating it with its quota.
func (a *accounting) nsOf(ns string) *nsAcct {
	n, ok := a.ns[ns]
	if !ok {
		if len(a.ns) >= a.sweepAt {
			a.sweepNamespaces()
		}
		n = &nsAcct{name: ns, idx: len(a.nsList), quota: a.quotas.For(ns), head: nilSlot, tailSlot: nilSlot}
		if k := len(a.nsFree); k > 0 {
			n.id, a.nsFree = a.nsFree[k-1], a.nsFree[:k-1]
			a.nsByID[n.id] = n
		} else {
			n.id = uint32(len(a.nsByID))
			a.nsByID = append(a.nsByID, n)
		}
		a.ns[ns] = n
		a.nsList = append(a.nsList, n)
		a.tails = append(a.tails, emptyTail)
	}
	return n
}

// sweepNamespaces forgets the forgettable namespace records (see
// maxNamespaceRecords) and sets the next sweep at twice what is left, so
// sweeps cost O(1) per record created.
func (a *accounting) sweepNamespaces() {
	kept := a.nsList[:0]
	for _, n := range a.nsList {
		_, listed := a.quotas.Namespaces[n.name]
		listed = listed || n.name == DefaultNamespace && !n.quota.IsZero() // setQuotas made it
		if !listed && n.count == 0 && n.reserved == 0 && n.reservedEntries == 0 {
			delete(a.ns, n.name)
			a.nsByID[n.id] = nil
			a.nsFree = append(a.nsFree, n.id)
			continue
		}
		kept = append(kept, n)
	}
	clear(a.nsList[len(kept):])
	a.nsList, a.tails = kept, a.tails[:len(kept)]
	for i, n := range a.nsList {
		n.idx = i
		a.tailMoved(n)
	}
	a.sweepAt = max(maxNamespaceRecords, 2*len(a.ns))
}

// setQuotas puts q in force: every namespace record takes its quota, and
// the namespaces q lists get a record (so their quota shows before they hold
// anything), and so does DefaultNamespace, which always exists, when q's
// default block bounds it.
func (a *accounting) setQuotas(q Quotas) {
	a.quotas = q
	for name, n := range a.ns {
		n.quota = q.For(name)
	}
	for name := range q.Namespaces {
		a.nsOf(name)
	}
	if !q.For(DefaultNamespace).IsZero() {
		a.nsOf(DefaultNamespace)
	}
}

// fitsClaim reports whether the claim fits under the store's and the
// namespace's bounds now. When it does not, victim is the entry to evict
// first: the namespace's least recently used when its quota refuses (reason
// quota), else the store's (reason size); ok is false when there is none.
func (a *accounting) fitsClaim(c claim) (fit bool, victim entryRef, reason evictReason, ok bool) {
	if c.ns != "" {
		n := a.nsOf(c.ns)
		if !n.fits(c) {
			if e, ok := a.tail(n); ok {
				return false, e.ref, evictQuota, true
			}
			return false, entryRef{}, evictQuota, false
		}
	}
	if a.fits(c.bytes) {
		return true, entryRef{}, 0, false
	}
	victim, ok = a.oldest()
	return false, victim, evictSize, ok
}

// impossibleClaim returns why the claim cannot fit even after evicting
// everything it may evict (an error wrapping ErrFull, or a *QuotaError), or
// nil.
func (a *accounting) impossibleClaim(c claim) error {
	if !a.possible(c.bytes) {
		return a.fullError(c)
	}
	if c.ns == "" {
		return nil
	}
	return a.nsOf(c.ns).impossible(c)
}

// fullError says why the claim cannot fit the store even after evicting
// everything: the upload alone is larger than the store (ErrNeverFits), or
// it fits but not beside what other uploads in flight hold (ErrFull: a
// retry after they finish may succeed). c.held is the upload's own earlier
// chunks, which the store's reservations include.
func (a *accounting) fullError(c claim) error {
	total := c.held + c.bytes
	if total > a.max {
		return fmt.Errorf("%s received so far: %w", formatBytes(total), ErrNeverFits)
	}
	return fmt.Errorf("the entry needs %s and other uploads in flight hold %s of the store's %s (--max-size); retry when they finish: %w",
		formatBytes(total), formatBytes(max(a.reserved-c.held, 0)), formatBytes(a.max), ErrFull)
}

// claimFitsNow reports whether the claim fits under every bound now, so
// that it can be reserved without evicting.
func (a *accounting) claimFitsNow(c claim) bool {
	if c.ns != "" && !a.nsOf(c.ns).fits(c) {
		return false
	}
	return a.fits(c.bytes)
}

// reserveClaim records the claim as held by an upload in flight.
func (a *accounting) reserveClaim(c claim) {
	a.reserve(c.bytes)
	if c.ns == "" {
		return
	}
	n := a.nsOf(c.ns)
	n.reserved += c.nsBytes
	if c.entry {
		n.reservedEntries++
	}
}

// releaseClaim returns what reserveClaim recorded.
func (a *accounting) releaseClaim(c claim) {
	a.release(c.bytes)
	if c.ns == "" {
		return
	}
	n, ok := a.ns[c.ns]
	if !ok {
		return // unreachable: a record with reservations is never forgotten
	}
	n.reserved = max(n.reserved-c.nsBytes, 0)
	if c.entry && n.reservedEntries > 0 {
		n.reservedEntries--
	}
}

// countEviction counts an entry of ns removed by the store for reason.
func (a *accounting) countEviction(ns string, reason evictReason) {
	a.evictions++
	a.nsOf(ns).evicted[reason]++
}

// nsUsage returns every namespace record's usage, by name.
func (a *accounting) nsUsage() []NamespaceUsage {
	if len(a.ns) == 0 {
		return nil
	}
	out := make([]NamespaceUsage, 0, len(a.ns))
	for _, n := range a.ns {
		out = append(out, n.usage())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// nsUsageOf returns namespace ns's usage (zero with its quota when the
// store has no record of it).
func (a *accounting) nsUsageOf(ns string) NamespaceUsage {
	if n, ok := a.ns[ns]; ok {
		return n.usage()
	}
	q := a.quotas.For(ns)
	return (&nsAcct{name: ns, quota: q}).usage()
}
