package explain

import (
	"strings"
	"sync"
	"time"
)

// IndexConfig bounds an Index. The zero value means the defaults.
type IndexConfig struct {
	// PerGroup bounds the entries kept per (namespace, backend); the oldest
	// are dropped first. Default 2048.
	PerGroup int
	// MaxGroups bounds the number of (namespace, backend) groups; once full,
	// entries of new groups are not indexed. Default 256.
	MaxGroups int
}

// Index keeps the components of recently written entries per (namespace,
// backend), bounded, so that misses can be explained without walking the
// store. It is safe for concurrent use.
type Index struct {
	mu     sync.RWMutex
	cfg    IndexConfig
	groups map[groupKey]*ring
}

type groupKey struct{ ns, backend string }

// ring is a fixed-capacity FIFO of candidates with a key → slot map so that
// re-adding a key replaces it in place.
type ring struct {
	items []Candidate
	next  int
	slots map[string]int
}

// NewIndex returns an empty index.
func NewIndex(cfg IndexConfig) *Index {
	if cfg.PerGroup <= 0 {
		cfg.PerGroup = 2048
	}
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 256
	}
	return &Index{cfg: cfg, groups: make(map[groupKey]*ring)}
}

// Add records the components of entry key in (ns, backend). Entries without
// components are ignored. Every string is copied, so callers may pass
// strings backed by reused buffers.
func (x *Index) Add(ns, backend, key, name string, created time.Time, components map[string]string) {
	if len(components) == 0 {
		return
	}
	comps := make(map[string]string, len(components))
	for k, v := range components {
		comps[strings.Clone(k)] = strings.Clone(v)
	}
	c := Candidate{Key: strings.Clone(key), Name: strings.Clone(name), Created: created, Components: comps}
	gk := groupKey{strings.Clone(ns), strings.Clone(backend)}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.groups[gk]
	if r == nil {
		if len(x.groups) >= x.cfg.MaxGroups {
			return
		}
		r = &ring{slots: make(map[string]int)}
		x.groups[gk] = r
	}
	if i, ok := r.slots[key]; ok {
		r.items[i] = c
		return
	}
	if len(r.items) < x.cfg.PerGroup {
		r.slots[key] = len(r.items)
		r.items = append(r.items, c)
		return
	}
	delete(r.slots, r.items[r.next].Key)
	r.items[r.next] = c
	r.slots[key] = r.next
	r.next = (r.next + 1) % len(r.items)
}

// Remove forgets entry key in (ns, backend), e.g. after a delete or an
// eviction. A missing key is ignored.
func (x *Index) Remove(ns, backend, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.groups[groupKey{ns, backend}]
	if r == nil {
		return
	}
	i, ok := r.slots[key]
	if !ok {
		return
	}
	// Blank the slot: an empty candidate never matches and is skipped.
	delete(r.slots, key)
	r.items[i] = Candidate{}
}

// Len returns the number of indexed entries in (ns, backend).
func (x *Index) Len(ns, backend string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	r := x.groups[groupKey{ns, backend}]
	if r == nil {
		return 0
	}
	return len(r.slots)
}

// Explain explains a miss of a signature with components want in (ns,
// backend) against the indexed entries.
func (x *Index) Explain(ns, backend string, want map[string]string) Explanation {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var cands []Candidate
	if r := x.groups[groupKey{ns, backend}]; r != nil {
		cands = make([]Candidate, 0, len(r.slots))
		for _, c := range r.items {
			if c.Key != "" {
				cands = append(cands, c)
			}
		}
	}
	return Explain(want, cands)
}
