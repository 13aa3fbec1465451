package stats

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/wire"
)

// Every label stats reports (namespace, backend, run, reason) becomes a
// Prometheus label value or a JSON string, and is persisted: one value that
// is not valid UTF-8 broke /metrics for good (issue 12, bug 1). So values are
// checked where they enter, when recorded and when loaded from disk: a
// namespace or run that is not valid counts under Other, a backend under
// UnknownBackend, and display strings are made valid.

// runRE is manifest's rule for a run id, compiled here so that checking one
// allocates nothing (manifest.ValidateRun builds an error).
var runRE = regexp.MustCompile(manifest.RunPattern)

func validNamespace(ns string) bool { return cachekey.ValidateNamespace(ns) == nil }

func validRun(run string) bool { return runRE.MatchString(run) }

func validBackend(b string) bool { return wire.SanitizeBackend(b) != "" }

// BackendOrUnknown returns b when it is a valid backend name (see
// wire.CheckBackend), and UnknownBackend when it is empty or invalid.
func BackendOrUnknown(b string) string {
	if wire.SanitizeBackend(b) == "" {
		return UnknownBackend
	}
	return b
}

// runLabel is run as Miss.Run shows it: itself when valid, "" for none,
// Other otherwise.
func runLabel(run string) string {
	if run == "" || validRun(run) {
		return strings.Clone(run)
	}
	return Other
}

// reasonLabel is a miss reason as counted: itself when it is a valid name
// (component names joined by "+", or a Reason constant), "unexplained" when
// empty, Other otherwise.
func reasonLabel(r string) string {
	switch {
	case r == "":
		return "unexplained"
	case r == Other || wire.CheckName(r) != nil:
		return Other
	}
	return r
}

// sanitizeMiss returns m with every string valid and not aliasing m's
// (callers may pass strings backed by reused buffers): namespace, backend
// and run as labels, the rest as display strings.
func sanitizeMiss(m Miss) Miss {
	if !validNamespace(m.Namespace) && m.Namespace != Other {
		m.Namespace = Other
	}
	m.Namespace = strings.Clone(m.Namespace)
	m.Backend = strings.Clone(BackendOrUnknown(m.Backend))
	m.Run = runLabel(m.Run)
	m.Key = strings.Clone(wire.SanitizeName(m.Key))
	m.DisplayName = strings.Clone(wire.SanitizeName(m.DisplayName))
	ex := &m.Explanation
	if ex.Reason != "" {
		ex.Reason = strings.Clone(reasonLabel(ex.Reason))
	}
	ex.Summary = strings.Clone(validText(ex.Summary))
	if ex.Nearest != nil {
		near := make([]wire.Nearest, len(ex.Nearest))
		for i, n := range ex.Nearest {
			n.Key, n.Name = strings.Clone(wire.SanitizeName(n.Key)), strings.Clone(wire.SanitizeName(n.Name))
			if n.Diffs != nil {
				diffs := make([]wire.Diff, len(n.Diffs))
				for j, d := range n.Diffs {
					d.Component = strings.Clone(wire.SanitizeName(d.Component))
					d.Want, d.Have = strings.Clone(validText(d.Want)), strings.Clone(validText(d.Have))
					diffs[j] = d
				}
				n.Diffs = diffs
			}
			near[i] = n
		}
		ex.Nearest = near
	}
	return m
}

// validText is s with invalid UTF-8 replaced by U+FFFD; unlike
// wire.SanitizeName it keeps the length (summaries name several
// components).
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// limiter admits up to max distinct valid values; invalid values count as
// invalid, and the rest as Other. Admitted values are read lock-free from an
// immutable map that admission replaces (copy on write: admissions are rare
// and bounded by max), so that a value already admitted costs one map read
// and is never checked again.
type limiter struct {
	known atomic.Pointer[map[string]string] // value → the same string, cloned
	mu    sync.Mutex
	max   int
	// valid reports whether a value may be admitted.
	valid func(string) bool
	// invalid is what a value that fails valid counts as: Other, or
	// UnknownBackend for backends (admitted like any other value).
	invalid string
	// keepAdded makes admit remember what it admits in added, for flush to
	// persist (see Stats.AdmitNamespace, Stats.AdmitBackend).
	keepAdded bool
	added     []string // guarded by mu
}

// takeAdded returns what was admitted since the last call.
func (l *limiter) takeAdded() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.added
	l.added = nil
	return a
}

// putAdded gives back what takeAdded returned, after a failed flush.
func (l *limiter) putAdded(a []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.added = append(l.added, a...)
}

// lookup returns the tracked copy of v and whether v is tracked.
func (l *limiter) lookup(v string) (string, bool) {
	if m := l.known.Load(); m != nil {
		c, ok := (*m)[v]
		return c, ok
	}
	return "", false
}

// get returns the tracked copy of v, or Other when v is not tracked; it
// admits nothing.
func (l *limiter) get(v string) string {
	if c, ok := l.lookup(v); ok {
		return c
	}
	return Other
}

// labelOf returns what v was counted as, admitting nothing: its tracked
// copy, l.invalid's when v is invalid, Other otherwise. It relabels values
// read from disk that were written before values were checked.
func (l *limiter) labelOf(v string) string {
	if c, ok := l.lookup(v); ok {
		return c
	}
	// Checking v matters only where invalid values count apart from Other
	// (backends); lookups in namespaces not admitted take this path, so
	// it stays one map read for them.
	if l.invalid != Other && v != Other && !l.valid(v) {
		return l.get(l.invalid)
	}
	return Other
}

// admit returns the tracked copy of v if v is (or can become) tracked, and
// Other otherwise; an invalid v is admitted as l.invalid. The returned
// string never aliases v, so callers may pass strings backed by reused
// buffers.
func (l *limiter) admit(v string) string {
	if c, ok := l.lookup(v); ok {
		return c
	}
	if v == Other {
		return Other
	}
	if !l.valid(v) {
		if l.invalid == Other {
			return Other
		}
		v = l.invalid
		if c, ok := l.lookup(v); ok {
			return c
		}
	}
	// Values are never removed, so once full the limiter stays full:
	// answer without the lock, since writers' lookups in namespaces
	// beyond the cap call admit on every request.
	if m := l.known.Load(); l.max <= 0 || (m != nil && len(*m) >= l.max) {
		return Other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.known.Load()
	if old != nil {
		if c, ok := (*old)[v]; ok {
			return c
		}
	}
	if (old != nil && len(*old) >= l.max) || l.max <= 0 {
		return Other
	}
	m := make(map[string]string, 1+lenOf(old))
	if old != nil {
		for k, c := range *old {
			m[k] = c
		}
	}
	c := strings.Clone(v)
	m[c] = c
	l.known.Store(&m)
	if l.keepAdded {
		l.added = append(l.added, c)
	}
	return c
}

func lenOf(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
