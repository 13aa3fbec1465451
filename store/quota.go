package store

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// ErrQuota means an entry cannot fit under its namespace's quota even after
// evicting the namespace's least recently used entries: it is larger than
// the namespace's max_bytes, or uploads in flight into the namespace hold
// the room. Nothing was stored. The error is a *QuotaError, which names the
// namespace and the limit.
var ErrQuota = errors.New("namespace quota exceeded")

// Quota bounds one namespace of a store. The zero value bounds nothing.
type Quota struct {
	// MaxBytes bounds the sum of the sizes of the namespace's entries; a
	// blob shared with another namespace counts in each. 0 means no bound.
	MaxBytes int64
	// MaxEntries bounds the namespace's entries. 0 means no bound.
	MaxEntries int64
	// MaxIdle evicts an entry not read or written for this long. 0 means
	// never.
	MaxIdle time.Duration
	// MaxAge evicts an entry this long after it was stored, however often
	// it is read. 0 means never.
	MaxAge time.Duration
}

// IsZero reports whether q bounds nothing.
func (q Quota) IsZero() bool { return q == Quota{} }

// Quotas are the quotas of a store's namespaces: Namespaces by name, and
// Default for every namespace not listed (a listed namespace gets its own
// Quota only, not a merge with Default).
type Quotas struct {
	Namespaces map[string]Quota
	Default    Quota
}

// For returns the quota of namespace ns.
func (q Quotas) For(ns string) Quota {
	if nq, ok := q.Namespaces[ns]; ok {
		return nq
	}
	return q.Default
}

// clone returns a copy of q that shares no map with it.
func (q Quotas) clone() Quotas {
	c := Quotas{Default: q.Default, Namespaces: make(map[string]Quota, len(q.Namespaces))}
	for ns, nq := range q.Namespaces {
		c.Namespaces[ns] = nq
	}
	return c
}

// Eviction reasons, the reason label of per-namespace eviction counts and
// of Config.OnEvict: the wire's, so that the statistics that persist the
// counts and the API that reports them use the very same values.
const (
	// ReasonSize is an eviction to make room under Config.MaxBytes.
	ReasonSize = wire.ReasonSize
	// ReasonQuota is an eviction to make room under a namespace's
	// MaxBytes or MaxEntries.
	ReasonQuota = wire.ReasonQuota
	// ReasonIdle is an expiry under a namespace's MaxIdle.
	ReasonIdle = wire.ReasonIdle
	// ReasonAge is an expiry under a namespace's MaxAge.
	ReasonAge = wire.ReasonAge
)

// evictReason indexes nsAcct.evicted.
type evictReason int

const (
	evictSize evictReason = iota
	evictQuota
	evictIdle
	evictAge
	numReasons
)

// String returns the reason's label.
func (r evictReason) String() string {
	return [...]string{ReasonSize, ReasonQuota, ReasonIdle, ReasonAge}[r]
}

// expiry reports whether the reason is an expiry rather than an eviction
// for room.
func (r evictReason) expiry() bool { return r == evictIdle || r == evictAge }

// QuotaError is the error of a Put refused by its namespace's quota. It
// matches ErrQuota with errors.Is.
type QuotaError struct {
	// Namespace is the namespace whose quota refused the entry.
	Namespace string
	// Limit is the quota's field that refused it: "max_bytes" or
	// "max_entries".
	Limit string
	// Quota is that field's value (bytes or entries).
	Quota int64
	// Need is what the entry needed: its bytes (max_bytes) or 1
	// (max_entries).
	Need int64
	// InFlight is what uploads in flight into the namespace hold (bytes or
	// entries); when it is not 0, retrying after they finish may succeed.
	InFlight int64
}

// Error says which quota refused the entry and what to do.
func (e *QuotaError) Error() string {
	if e.Limit == "max_entries" {
		return fmt.Sprintf("namespace %q is at its quota of %d entries (max_entries): %d uploads into it are in flight; retry when they finish, or raise max_entries for %q in the namespaces file and send the server SIGHUP",
			e.Namespace, e.Quota, e.InFlight, e.Namespace)
	}
	if e.Transient() {
		return fmt.Sprintf("namespace %q is at its quota of %s (max_bytes): uploads in flight into it hold %s; retry when they finish, or raise max_bytes for %q in the namespaces file and send the server SIGHUP",
			e.Namespace, formatBytes(e.Quota), formatBytes(e.InFlight), e.Namespace)
	}
	return fmt.Sprintf("namespace %q is at its quota of %s (max_bytes): this entry of %s can never fit; raise max_bytes for %q in the namespaces file and send the server SIGHUP, or store it in another namespace",
		e.Namespace, formatBytes(e.Quota), formatBytes(e.Need), e.Namespace)
}

// Transient reports whether a retry may succeed: uploads in flight into
// the namespace hold room that the entry fits in once they finish.
// Otherwise the entry can never fit the quota as it stands.
func (e *QuotaError) Transient() bool { return e.InFlight > 0 && e.Need <= e.Quota }

// NeverFits reports whether err refuses an entry that no retry can store:
// one larger than the store's size limit (ErrNeverFits) or than its
// namespace's quota (a QuotaError that is not Transient).
func NeverFits(err error) bool {
	if qe := (*QuotaError)(nil); errors.As(err, &qe) {
		return !qe.Transient()
	}
	return errors.Is(err, ErrNeverFits)
}

// Is makes a QuotaError match ErrQuota.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// formatBytes renders n bytes for people: exactly in the largest decimal or
// binary unit that divides it ("50 GB", "512 MiB"), else to one decimal in
// decimal units with the exact count ("1.3 GB (1300000123 bytes)").
func formatBytes(n int64) string {
	units := []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"kB", 1e3}}
	for _, u := range units {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + " " + u.name
		}
	}
	for _, u := range []struct {
		name string
		mult float64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if float64(n) >= u.mult {
			return fmt.Sprintf("%.1f %s (%d bytes)", float64(n)/u.mult, u.name, n)
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// validate checks that every namespace q names is valid and no bound is
// negative.
func (q Quotas) validate() error {
	check := func(what string, nq Quota) error {
		if nq.MaxBytes < 0 || nq.MaxEntries < 0 || nq.MaxIdle < 0 || nq.MaxAge < 0 {
			return fmt.Errorf("quota of %s: %w: a bound is negative (%+v); use 0 for none", what, ErrInvalid, nq)
		}
		return nil
	}
	if err := check("the default", q.Default); err != nil {
		return err
	}
	for ns, nq := range q.Namespaces {
		if err := checkNamespace("quota of namespace "+strconv.Quote(ns), ns); err != nil {
			return err
		}
		if err := check("namespace "+strconv.Quote(ns), nq); err != nil {
			return err
		}
	}
	return nil
}
