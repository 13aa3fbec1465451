package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// with runs fn on an instance (a pooled one, or a fresh one) under the call
// timeout, and discards the instance unless fn succeeded or the plugin merely
// rejected the input.
func (p *Plugin) with(ctx context.Context, fresh bool, fn func(context.Context, *instance) (any, error)) (v any, err error) {
	p.enter()
	defer p.exit()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if obs := p.host.cfg.Observe; obs != nil && p.info.Name != "" { // not describe during Load
		start := time.Now()
		defer func() { obs(p.info.ID, time.Since(start), err) }()
	}
	var inst *instance
	if fresh {
		inst, err = p.newInstance(ctx)
	} else {
		inst, err = p.acquire(ctx)
	}
	if err != nil {
		return nil, err
	}
	v, err = p.guarded(ctx, inst, fn)
	keep := err == nil || errors.Is(err, ErrPlugin) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInputTooLarge)
	if inst.stopped {
		keep = false // its stop flag is set: it would trap within a few thousand checks
	}
	if keep && inst.mod.Memory().Size() > uint32(p.host.cfg.MaxMemoryBytes/2) {
		keep = false // give back the memory of an instance that grew large
	}
	if fresh {
		inst.close(context.Background())
		return v, err
	}
	if !keep {
		p.failures.Add(1)
		p.host.cfg.Logger.Warn("plugin instance discarded", "plugin", p.info.ID, "err", err)
	}
	p.release(inst, keep)
	return v, err
}

// guarded runs fn on inst under the call timeout and ctx.
//
// An instrumented plugin is stopped through its stop flag (see
// plugins/internal/wasmstop): a timer for the call timeout, ctx ending or
// the plugin closing sets it, and the running code traps within a few
// thousand loop iterations or calls; guarded then reports ErrTimeout, ctx's error or ErrClosed
// instead of the trap, and marks the instance stopped (never reused, even
// if the call won the race and succeeded).
//
// Otherwise wazero (close-on-context-done) stops the running wasm and
// closes the instance when the call's context ends, and classify turns
// that into ErrTimeout or the caller's own error. (Closing the module from
// a timer goroutine instead races with WASI host functions inside wazero,
// so the context is the only safe interrupt there.)
func (p *Plugin) guarded(ctx context.Context, inst *instance, fn func(context.Context, *instance) (any, error)) (any, error) {
	inst.stderr.reset()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("call plugin %s: %w", p.info.ID, err)
	}
	if !p.instrumented {
		cctx, cancel := context.WithTimeout(ctx, p.host.cfg.CallTimeout)
		v, err := fn(cctx, inst)
		cancel()
		if err != nil && ctx.Err() != nil && !errors.Is(err, ErrPlugin) {
			return nil, fmt.Errorf("call plugin %s: %w", p.info.ID, ctx.Err())
		}
		return v, err
	}
	s := &stopper{flag: inst.stop}
	timer := time.AfterFunc(p.host.cfg.CallTimeout, func() { s.stop(errStopTimeout) })
	unhookCtx := context.AfterFunc(ctx, func() { s.stop(errStopCtx) })
	unhookClose := context.AfterFunc(p.closing, func() { s.stop(ErrClosed) })
	v, err := fn(ctx, inst)
	why := s.finish()
	timer.Stop()
	unhookCtx()
	unhookClose()
	if why == nil {
		return v, err
	}
	inst.stopped = true
	switch {
	case err == nil || errors.Is(err, ErrPlugin):
		return v, err // finished before the flag was seen
	case ctx.Err() != nil:
		return nil, fmt.Errorf("call plugin %s: %w", p.info.ID, ctx.Err())
	case why == ErrClosed:
		return nil, fmt.Errorf("call plugin %s: %w", p.info.ID, ErrClosed)
	case why == errStopTimeout && errors.Is(err, ErrTrap):
		return nil, p.fail(ErrTimeout, "did not finish within %s", p.host.cfg.CallTimeout)
	}
	return v, err
}

// Reasons a stopper sets the flag (besides ErrClosed).
var (
	errStopTimeout = errors.New("call timeout")
	errStopCtx     = errors.New("caller's context ended")
)

// stopper sets one instance's stop flag for one call: at most once, and
// never after the call has ended (so a pooled instance is never stopped by
// a call that is over).
type stopper struct {
	mu   sync.Mutex
	flag api.MutableGlobal
	done bool
	why  error
}

func (s *stopper) stop(why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.why != nil {
		return
	}
	s.why = why
	s.flag.Set(1)
}

// finish ends the call: later stops do nothing. It returns why the flag
// was set, or nil if it was not.
func (s *stopper) finish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	return s.why
}
