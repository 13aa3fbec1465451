package tiered

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// EventKind names what an Event reports.
type EventKind string

// Event kinds. Each is emitted once per operation, after it ends.
const (
	// EventSharedGet is a read of an entry from the shared tier (record and
	// blob): Bytes read, Duration until the last byte, Err (store.ErrNotFound
	// for a shared-tier miss).
	EventSharedGet EventKind = "shared_get"
	// EventSharedPut is a write of an entry to the shared tier, by a Put in
	// ModeThrough or an upload from the queue in ModeBehind.
	EventSharedPut EventKind = "shared_put"
	// EventFill is a fill of the hot tier from a spool.
	EventFill EventKind = "fill"
	// EventFillSkipped is a hot miss served without a fill of the hot tier:
	// the spool budget (Config.MaxSpoolBytes) was spent, or the entry is
	// larger than the whole hot tier (store.ErrNeverFits).
	EventFillSkipped EventKind = "fill_skipped"
	// EventQueued is a Put accepted into the upload queue (ModeBehind).
	EventQueued EventKind = "queued"
	// EventUploadDropped is a queued entry given up on without an upload:
	// the shared tier holds different bytes under its key (Err wraps
	// store.ErrConflict) or the queue's copy is damaged.
	EventUploadDropped EventKind = "upload_dropped"
)

// Event is what Config.Observe receives: one operation of the tiered store
// on a tier, for metrics (the api turns events into Prometheus series; this
// package imports no metrics library).
type Event struct {
	// Kind says which operation this was.
	Kind EventKind
	// Namespace is the entry's namespace, where the operation had one.
	Namespace string
	// Duration is how long the operation took; zero when not timed.
	Duration time.Duration
	// Bytes is the entry bytes moved (or, for EventFillSkipped and
	// EventQueued, the entry's size).
	Bytes int64
	// Err is the operation's error, nil on success.
	Err error
}

// emit calls Config.Observe, if set.
func (s *Store) emit(e Event) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(e)
	}
}

// SharedState is what the store knows of the shared tier's health, from the
// outcomes of its own requests and a background probe (Config.ProbeInterval)
// when there were none lately; reading it costs no request.
type SharedState struct {
	// Reachable is false when the last request (or probe) failed with
	// store.ErrUnavailable or could not be made.
	Reachable bool
	// LastSuccess is when a request last got an answer (a miss counts).
	LastSuccess time.Time
	// LastError is the last failure's message, and LastErrorAt its time;
	// empty when there was none.
	LastError   string
	LastErrorAt time.Time
}

// health holds SharedState.
type health struct {
	mu sync.Mutex
	st SharedState
	// recheck asks the probe loop for a probe now: a request's failure
	// marked the tier unreachable, and one transient error must not leave
	// it marked so (cutting guarded calls short, failfast.go) until the
	// next scheduled probe.
	recheck chan struct{}
}

// SharedState returns the shared tier's last known state.
func (s *Store) SharedState() SharedState {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.st
}

// Ready reports whether the store serves requests, for /readyz: whether its
// hot tier does (nil, or why not). The shared tier is not part of it: a
// replica whose bucket cannot be reached still serves its hot tier, and
// failing readiness on every replica during an S3 outage would empty the
// load balancer; SharedState says how the shared tier is doing. It makes no
// request to the shared tier.
func (s *Store) Ready() error {
	if err := store.Serving(context.Background(), s.hot); err != nil {
		return fmt.Errorf("hot tier: %w", err)
	}
	return nil
}

// observe records a shared-tier request's outcome in SharedState: an
// answer (success, miss, conflict, corrupt) shows the tier reachable;
// store.ErrUnavailable shows it not, and asks for a probe now when it
// marked the tier unreachable. Context errors say nothing.
func (s *Store) observe(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if s.setHealth(err) {
		select {
		case s.health.recheck <- struct{}{}:
		default: // a probe is asked for already
		}
	}
}

// setHealth records err (nil: an answer) as the shared tier's state and
// reports whether it marked a reachable tier unreachable.
func (s *Store) setHealth(err error) (down bool) {
	now := time.Now()
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if err != nil && errors.Is(err, store.ErrUnavailable) {
		down = s.health.st.Reachable
		s.health.st.Reachable = false
		s.health.st.LastError, s.health.st.LastErrorAt = err.Error(), now
		return down
	}
	s.health.st.Reachable = true
	s.health.st.LastSuccess = now
	return false
}

// sharedResult records a shared-tier operation in SharedState, Stats and
// Config.Observe.
func (s *Store) sharedResult(kind EventKind, d time.Duration, bytes int64, err error) {
	s.observe(err)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.n.sharedErrors.Add(1)
	}
	if kind == EventSharedGet && err == nil {
		s.n.sharedBytesRead.Add(bytes)
	}
	s.emit(Event{Kind: kind, Duration: d, Bytes: bytes, Err: err})
}

// probeLoop asks the shared tier for a key no entry has every
// Config.ProbeInterval, unless a request got an answer within the interval,
// and at once when a request's failure marked the tier unreachable.
func (s *Store) probeLoop() {
	defer s.wg.Done()
	var probeKey store.Key // all zeros: no plugin makes it
	for {
		st := s.SharedState()
		if !st.Reachable || time.Since(st.LastSuccess) >= s.cfg.ProbeInterval {
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ProbeInterval)
			_, err := s.shared.Stat(ctx, store.DefaultNamespace, probeKey)
			cancel()
			if s.ctx.Err() != nil {
				return
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrUnavailable) {
				err = fmt.Errorf("probe: %w: %w", store.ErrUnavailable, err) // a timeout or a refusal: not ready
			}
			s.setHealth(err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(s.cfg.ProbeInterval):
		case <-s.health.recheck:
		}
	}
}
