package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
)

// Result is one successful canonicalization. Its slices and map are owned by
// the caller (copied out of the plugin's memory).
type Result struct {
	// Canonical is the canonical form of the signature.
	Canonical []byte
	// Components names digests of the signature's parts (for explaining
	// misses); never nil.
	Components map[string]string
	// DisplayName is a human-readable program name; not part of the key.
	DisplayName string
}

// Plugin is one compiled module with its pool of live instances. It is safe
// for concurrent use; at most Config.PoolSize calls run at once.
type Plugin struct {
	host         *Host
	compiled     wazero.CompiledModule
	rt           wazero.Runtime // the runtime compiled belongs to
	source       string
	info         Info
	instrumented bool // stopped by its wasmstop flag, not by wazero

	// closing ends when Close is called; it stops the instrumented calls
	// still running.
	closing context.Context
	close   context.CancelFunc

	idle  chan *instance // ready instances
	slots chan struct{}  // one token per live instance (bounds the pool)

	closed    atomic.Bool
	instances atomic.Int64 // instances created, for tests and metrics
	failures  atomic.Int64 // instances discarded after a failure
	live      atomic.Int64 // instances started and not yet closed

	// digest is the sha256 of the module bytes as loaded (before
	// instrumentation); Host.ReloadDir keeps a plugin whose file still has
	// them.
	digest  [32]byte
	codeHex string // hex of digest, for CodeSHA256

	// Calls in progress, for Drain.
	callMu  sync.Mutex
	calls   int
	drained chan struct{} // closed when calls drops to 0 during Drain; nil otherwise
}

// Info describes the plugin.
func (p *Plugin) Info() Info {
	i := p.info
	i.SHA256 = p.codeHex
	i.Backends = append([]string(nil), i.Backends...)
	i.Reads = append([]string(nil), i.Reads...)
	return i
}

// ID returns "name@version", the identity hashed into every key.
func (p *Plugin) ID() string { return p.info.ID }

// CodeSHA256 returns the hex SHA-256 of the plugin's wasm code as loaded
// (Info.SHA256), computed once at load. Two files of one name@version may
// canonicalize differently (a fix that did not bump the version), so a
// memo of results keeps this beside each one and uses it only for the
// same code.
func (p *Plugin) CodeSHA256() string { return p.codeHex }

// Stats reports how many instances were started and how many were discarded
// after a failure.
func (p *Plugin) Stats() (started, discarded int64) {
	return p.instances.Load(), p.failures.Load()
}

// Close discards the plugin's idle instances; busy ones are discarded when
// their call ends. Later calls fail with ErrClosed.
func (p *Plugin) Close(ctx context.Context) {
	if p.closed.Swap(true) {
		return
	}
	if p.close != nil {
		p.close()
	}
	for {
		select {
		case inst := <-p.idle:
			inst.close(ctx)
		default:
			p.compiled.Close(ctx)
			return
		}
	}
}

// Drain closes the plugin gracefully: it waits for the calls in progress
// to finish, for at most wait (or until ctx ends), and then closes it as
// Close does, stopping whatever is still running with ErrClosed. Calls that
// start while it waits still run (a caller may have looked the plugin up
// just before it was retired); later calls fail with ErrClosed. Host.ReloadDir
// drains the plugins it removes or replaces with wait set to
// Config.AcquireTimeout + Config.CallTimeout, the longest a call that has
// started may take.
func (p *Plugin) Drain(ctx context.Context, wait time.Duration) {
	p.callMu.Lock()
	if p.calls == 0 || p.closed.Load() {
		p.callMu.Unlock()
		p.Close(ctx)
		return
	}
	if p.drained == nil {
		p.drained = make(chan struct{})
	}
	drained := p.drained
	p.callMu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		p.host.cfg.Logger.Warn("plugin calls still running after the drain timeout; stopping them", "plugin", p.info.ID, "wait", wait)
	case <-ctx.Done():
	}
	p.Close(ctx)
}

// enter counts a call in; every enter is paired with an exit.
func (p *Plugin) enter() {
	p.callMu.Lock()
	p.calls++
	p.callMu.Unlock()
}

// exit counts a call out and wakes Drain after the last one.
func (p *Plugin) exit() {
	p.callMu.Lock()
	p.calls--
	if p.calls == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	p.callMu.Unlock()
}

// inFlight returns the number of calls in progress.
func (p *Plugin) inFlight() int {
	p.callMu.Lock()
	defer p.callMu.Unlock()
	return p.calls
}

// Canonicalize hands signature to the plugin and returns its result.
//
// # Errors
//
// An *Error whose Kind is ErrPlugin (the plugin's own message), ErrTimeout,
// ErrTrap, ErrMemory, ErrOutput, ErrInputTooLarge or ErrBusy; ErrClosed; or
// ctx's error if ctx ends first.
func (p *Plugin) Canonicalize(ctx context.Context, signature []byte) (Result, error) {
	v, err := p.with(ctx, false, func(ctx context.Context, inst *instance) (any, error) {
		return p.canonicalize(ctx, inst, signature)
	})
	res, _ := v.(Result)
	return res, err
}

// CanonicalizeFresh is Canonicalize on a new instance that is discarded
// afterwards (conformance checks: results must not depend on history).
func (p *Plugin) CanonicalizeFresh(ctx context.Context, signature []byte) (Result, error) {
	v, err := p.with(ctx, true, func(ctx context.Context, inst *instance) (any, error) {
		return p.canonicalize(ctx, inst, signature)
	})
	res, _ := v.(Result)
	return res, err
}

// ErrUnsupported is returned by Normalize for a plugin without normalize.
var ErrUnsupported = errors.New("plugin does not implement normalize")

// Normalize calls the plugin's optional normalize export (ABI.md), which
// returns the signature rewritten into its normal form.
//
// # Errors
//
// ErrUnsupported if the plugin has no normalize; otherwise as Canonicalize.
func (p *Plugin) Normalize(ctx context.Context, signature []byte) ([]byte, error) {
	v, err := p.with(ctx, false, func(ctx context.Context, inst *instance) (any, error) {
		if inst.normalize == nil {
			return nil, ErrUnsupported
		}
		var r resultJSON
		region, err := p.invoke(ctx, inst, inst.normalize, signature, "normalized", &r)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Unsupported:
			return nil, ErrUnsupported
		case r.Error != nil:
			return nil, &Error{Plugin: p.info.ID, Kind: ErrPlugin, Message: boundMessage(*r.Error)}
		case region == nil:
			return nil, p.fail(ErrOutput, "normalize result has neither normalized_ptr/normalized_len nor error")
		}
		return region, nil
	})
	out, _ := v.([]byte)
	return out, err
}

func (p *Plugin) fail(kind error, format string, args ...any) *Error {
	return &Error{Plugin: p.info.ID, Kind: kind, Message: fmt.Sprintf(format, args...)}
}
