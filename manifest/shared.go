package manifest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Defaults for the shared fields of Config.
const (
	// DefaultFlushInterval is how often changed runs go to Shared.
	DefaultFlushInterval = 2 * time.Second
	// DefaultMaxReplicas bounds the parts one Manifest merges.
	DefaultMaxReplicas = 256
	// DefaultSharedTimeout bounds one flush of one run or one merge's reads.
	DefaultSharedTimeout = 5 * time.Second
)

// refreshShared is how often a run that only saw lookups of known keys is
// flushed anyway, so that its part's Updated time keeps it alive for other
// replicas' TTL checks.
const refreshShared = time.Minute

// ReplicaPattern is what Config.ReplicaID must match: it names an object.
const ReplicaPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

var replicaRE = regexp.MustCompile(ReplicaPattern)

// Shared stores each replica's part of each run for the whole fleet,
// declared here where it is consumed (fleet/state implements it on S3 as
// runs/<ns>/<run>/<replica>.json). Implementations must be safe for
// concurrent use by many processes. Any error is a fault: the Recorder
// keeps the run unflushed and retries at the next flush.
type Shared interface {
	// PutPart stores p as replica p.Replica's part of (p.Namespace, p.Run),
	// replacing the one it stored before.
	PutPart(ctx context.Context, p Part) error
	// Parts returns the stored parts of (ns, run), at most max of them;
	// more says that others were left out. A run no replica stored has no
	// parts and no error.
	Parts(ctx context.Context, ns, run string, max int) (parts []Part, more bool, err error)
}

// Part is one replica's records of one run, as Shared stores them.
type Part struct {
	Replica   string    `json:"replica"`
	Namespace string    `json:"namespace"`
	Run       string    `json:"run"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Keys      []PartKey `json:"keys"`
	Truncated bool      `json:"truncated"`
}

// PartKey is a key record with the time the replica first saw it, which
// orders the merge: keys in first-use order across replicas.
type PartKey struct {
	KeyRecord
	First time.Time `json:"first"`
}

func sharedDefaults(cfg *Config) error {
	if cfg.Shared == nil {
		return nil
	}
	if !replicaRE.MatchString(cfg.ReplicaID) {
		return fmt.Errorf("new run recorder: replica id %q must match %s", cfg.ReplicaID, ReplicaPattern)
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.MaxReplicas <= 0 {
		cfg.MaxReplicas = DefaultMaxReplicas
	}
	if cfg.SharedTimeout <= 0 {
		cfg.SharedTimeout = DefaultSharedTimeout
	}
	return nil
}

func (rr *runRec) part(replica, ns, run string) Part {
	p := Part{Replica: replica, Namespace: ns, Run: run, Created: rr.created, Updated: rr.updated,
		Truncated: rr.truncated, Keys: make([]PartKey, len(rr.keys))}
	for i, k := range rr.keys {
		p.Keys[i] = PartKey{KeyRecord: k, First: rr.first[i]}
	}
	return p
}

func (p Part) manifest() Manifest {
	m := Manifest{Run: p.Run, Namespace: p.Namespace, Created: p.Created, Updated: p.Updated,
		Truncated: p.Truncated, Keys: make([]KeyRecord, len(p.Keys))}
	for i, k := range p.Keys {
		m.Keys[i] = k.KeyRecord
	}
	return m
}

// merged answers Manifest with Shared: the local part (if any) merged with
// every replica's live part.
func (r *Recorder) merged(ctx context.Context, ns, run string, local Part, ok bool) (Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SharedTimeout)
	defer cancel()
	parts, more, err := r.cfg.Shared.Parts(ctx, ns, run, r.cfg.MaxReplicas)
	if err != nil {
		r.cfg.Logger.Warn("read shared run manifests; answering with this replica's records", "namespace", ns, "run", run, "err", err)
		if !ok {
			return Manifest{}, fmt.Errorf("%w: run %q in namespace %q: %w", ErrUnavailable, run, ns, err)
		}
		return local.manifest(), nil
	}
	now := r.cfg.Now()
	var all []Part
	if ok {
		all = append(all, local)
	}
	// This replica's own stored part is merged too: it may hold records the
	// local table lost (a restart without a snapshot file).
	slices.SortFunc(parts, func(a, b Part) int { return cmp.Compare(a.Replica, b.Replica) })
	for _, p := range parts {
		if p.Namespace == ns && p.Run == run && now.Sub(p.Updated) <= r.cfg.TTL {
			all = append(all, p)
		}
	}
	if len(all) == 0 {
		return Manifest{}, r.unknown(ns, run)
	}
	m := merge(all, r.cfg.MaxKeysPerRun)
	m.Truncated = m.Truncated || more
	return m, nil
}

// merge unions parts: keys in first-use order (ties in part order),
// looked_up and written OR-ed, the first name recorded kept; at most
// maxKeys keys (more set Truncated).
func merge(parts []Part, maxKeys int) Manifest {
	type mk struct {
		PartKey
		seq int
	}
	var keys []mk
	index := make(map[string]int)
	m := Manifest{Run: parts[0].Run, Namespace: parts[0].Namespace, Created: parts[0].Created}
	for _, p := range parts {
		if p.Created.Before(m.Created) {
			m.Created = p.Created
		}
		if p.Updated.After(m.Updated) {
			m.Updated = p.Updated
		}
		m.Truncated = m.Truncated || p.Truncated
		for _, k := range p.Keys {
			i, seen := index[k.Key]
			if !seen {
				index[k.Key] = len(keys)
				keys = append(keys, mk{PartKey: k, seq: len(keys)})
				continue
			}
			e := &keys[i]
			e.LookedUp = e.LookedUp || k.LookedUp
			e.Written = e.Written || k.Written
			if e.Name == "" {
				e.Name = k.Name
			}
			if k.First.Before(e.First) {
				e.First = k.First
			}
		}
	}
	slices.SortFunc(keys, func(a, b mk) int {
		if c := a.First.Compare(b.First); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if len(keys) > maxKeys {
		keys, m.Truncated = keys[:maxKeys], true
	}
	m.Keys = make([]KeyRecord, len(keys))
	for i, k := range keys {
		m.Keys[i] = k.KeyRecord
	}
	return m
}

// Flush stores every run changed since its last flush in Config.Shared,
// one PutPart each (bounded by SharedTimeout). A run that fails stays
// marked and goes with the next flush. Without Shared it does nothing.
func (r *Recorder) Flush(ctx context.Context) error {
	if r.cfg.Shared == nil {
		return nil
	}
	r.mu.Lock()
	var parts []Part
	for id, rr := range r.runs {
		if rr.unshared {
			parts = append(parts, rr.part(r.cfg.ReplicaID, id.ns, id.run))
			rr.unshared, rr.flushed = false, rr.updated
		}
	}
	r.mu.Unlock()
	var errs []error
	for i, p := range parts {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.SharedTimeout)
		err := r.cfg.Shared.PutPart(pctx, p)
		cancel()
		if err == nil {
			continue
		}
		errs = append(errs, err)
		r.remark(p)
		if ctx.Err() != nil || len(errs) >= 3 {
			// A backend this broken fails the rest too: leave them marked
			// for the next flush rather than wait out every timeout.
			for _, q := range parts[i+1:] {
				r.remark(q)
			}
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("flush run manifests: %d of %d runs failed: %w", len(errs), len(parts), errs[0])
	}
	return nil
}

// remark marks p's run for the next flush again.
func (r *Recorder) remark(p Part) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr := r.runs[runID{p.Namespace, p.Run}]; rr != nil {
		rr.unshared = true
	}
}

func (r *Recorder) flushEvery(ctx context.Context) {
	defer r.flushing.Done()
	t := time.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Flush(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.cfg.Logger.Warn("flush run manifests to the shared tier", "err", err)
			}
		}
	}
}

// Close stops the flush goroutine and flushes a last time. It does not
// write the snapshot file (Save does). Without Shared it does nothing.
func (r *Recorder) Close() error {
	if r.stop == nil {
		return nil
	}
	r.stop()
	r.flushing.Wait()
	return r.Flush(context.Background())
}
