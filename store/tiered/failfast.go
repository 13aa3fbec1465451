package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// unreachableWait is how long a request-path call to the shared tier may
// go without an answer once SharedState says the tier is unreachable.
//
// A shared tier that accepts connections and never answers (a hung
// gateway, a stopped server process) otherwise holds each call for the S3
// client's tries of its response-header timeout, minutes, long after the
// probe has marked it down: an ML job's miss lookup parks instead of
// compiling, holding a connection and a goroutine. This is a circuit
// breaker whose half-open state is the probe, and it bounds the call rather
// than failing it at once, because a single transient error (one 503, one
// stalled body) marks the tier unreachable too: failing every call at once
// would black the tier out until the next probe, while a bounded call to a
// tier that answers simply succeeds (and marks it reachable again). A tier
// that is down hard (connection refused) fails calls at once anyway; only a
// hung one costs each call this wait. The few seconds are far above a
// healthy S3 request's first answer and far below a compile.
//
// It is a constant, not a setting: it only bounds calls to a tier the
// probe has already found unreachable, and any call that gets an answer
// within it succeeds, so a slow but answering bucket never meets it; the
// knob that fits a slower bucket is the probe (Config.ProbeInterval).
const unreachableWait = 3 * time.Second

// errNoAnswer is the cause a guarded call's context is canceled with; the
// call's error is then reported as it (store.ErrUnavailable), never as the
// caller's context ending.
var errNoAnswer = fmt.Errorf("%w: no answer within %s while it is marked unreachable", store.ErrUnavailable, unreachableWait)

// guarded is the context of one request-path call to the shared tier (see
// guard).
type guarded struct {
	context.Context
	parent context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	// answered is when the call last got an answer of its own (UnixNano),
	// 0 for none: a walk's entries, each an answer from the tier.
	answered atomic.Int64
}

// guard returns the context for a request-path call to the shared tier
// (a hot miss's Get, Stat, a write-through Put, Delete, Walk): every
// unreachableWait until disarm, the call is canceled if SharedState says
// the tier is unreachable and nothing got an answer from it within the
// last unreachableWait, so calls started before the probe marked it down
// end too. Background calls (the upload queue, the probe) are not guarded:
// they retry on their own schedule. The caller must call disarm once the
// call has returned and release once it is done with what the call
// returned (a Get's reader reads under this context).
func (s *Store) guard(ctx context.Context) *guarded {
	g := &guarded{parent: ctx}
	g.Context, g.cancel = context.WithCancelCause(ctx)
	g.mu.Lock()
	g.timer = time.AfterFunc(unreachableWait, func() { s.check(g) })
	g.mu.Unlock()
	return g
}

// check cancels g's call if the tier is known down, else looks again
// after unreachableWait.
func (s *Store) check(g *guarded) {
	st := s.SharedState()
	last := st.LastSuccess
	if a := g.answered.Load(); a > last.UnixNano() {
		last = time.Unix(0, a)
	}
	if !st.Reachable && time.Since(last) >= unreachableWait {
		g.cancel(errNoAnswer)
		return
	}
	g.mu.Lock()
	if !g.stopped {
		g.timer.Reset(unreachableWait)
	}
	g.mu.Unlock()
}

// disarm stops the watch: the call has returned. It returns err, or
// errNoAnswer (with err's message) when the watch canceled the call and
// the caller's own context has not ended, so that a call cut short is an
// outage (503 shared_tier_unavailable) and not the client leaving.
func (g *guarded) disarm(err error) error {
	g.mu.Lock()
	g.stopped = true
	g.timer.Stop()
	g.mu.Unlock()
	if err == nil || g.parent.Err() != nil || !errors.Is(context.Cause(g.Context), errNoAnswer) {
		return err
	}
	msg := strings.TrimSuffix(err.Error(), ": "+context.Canceled.Error())
	return fmt.Errorf("%s: %w", msg, errNoAnswer)
}

// walkFn wraps a walk's fn: each entry is an answer from the tier, so a
// walk that goes on getting entries is not cut short while the tier is
// marked unreachable, however long it runs (an export of a large bucket);
// nor is the time the caller's fn takes counted as waiting for the tier.
func (g *guarded) walkFn(fn func(store.Meta) bool) func(store.Meta) bool {
	return func(m store.Meta) bool {
		g.answered.Store(time.Now().UnixNano())
		more := fn(m)
		g.answered.Store(time.Now().UnixNano())
		return more
	}
}

// release frees the context: the call and its result are done with.
func (g *guarded) release() { g.cancel(nil) }

// releaseOnClose is a shared-tier reader read under a guarded context,
// released when the reader is closed. It keeps the reader's WriteTo (a
// download copies through it).
type releaseOnClose struct {
	io.ReadCloser
	g *guarded
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.g.release()
	return err
}

// WriteTo implements io.WriterTo through the reader's own, if it has one.
func (r *releaseOnClose) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := r.ReadCloser.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{r.ReadCloser})
}
