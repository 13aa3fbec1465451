package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/cachesvc/cachesvc/plugins/internal/wasmstop"
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
	digest [32]byte

	// Calls in progress, for Drain.
	callMu  sync.Mutex
	calls   int
	drained chan struct{} // closed when calls drops to 0 during Drain; nil otherwise
}

// Info describes the plugin.
func (p *Plugin) Info() Info {
	i := p.info
	i.Backends = append([]string(nil), i.Backends...)
	i.Reads = append([]string(nil), i.Reads...)
	return i
}

// ID returns "name@version", the identity hashed into every key.
func (p *Plugin) ID() string { return p.info.ID }

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

func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	case p.slots <- struct{}{}:
		return p.newPooled(ctx)
	default:
	}
	t := time.NewTimer(p.host.cfg.AcquireTimeout)
	defer t.Stop()
	select {
	case inst := <-p.idle:
		return inst, nil
	case p.slots <- struct{}{}:
		return p.newPooled(ctx)
	case <-t.C:
		return nil, p.fail(ErrBusy, "all %d instances stayed busy for %s", cap(p.slots), p.host.cfg.AcquireTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for plugin %s: %w", p.info.ID, ctx.Err())
	}
}

func (p *Plugin) newPooled(ctx context.Context) (*instance, error) {
	inst, err := p.newInstance(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return inst, nil
}

func (p *Plugin) release(inst *instance, keep bool) {
	if keep && !p.closed.Load() {
		p.idle <- inst // never blocks: each live instance holds one slot
		return
	}
	inst.close(context.Background())
	<-p.slots
}

// instance is one live module; used by one call at a time.
type instance struct {
	mod          api.Module
	alloc        api.Function
	describe     api.Function
	canonicalize api.Function
	normalize    api.Function // nil if not exported
	stderr       *headWriter
	live         *atomic.Int64     // the plugin's count of live instances
	stop         api.MutableGlobal // the wasmstop flag; nil unless instrumented
	stopped      bool              // the flag was set: never call it again
	stack        [2]uint64
	bufPtr       uint32 // input buffer from the latest alloc
	bufCap       uint32 // its size
	hasBuf       bool
}

func (inst *instance) close(ctx context.Context) {
	inst.mod.Close(ctx)
	inst.live.Add(-1)
}

// constantWalltime hides the real clock: every reading is the Unix epoch.
func constantWalltime() (int64, int32) { return 0, 0 }

func (p *Plugin) newInstance(ctx context.Context) (*instance, error) {
	ictx, cancel := context.WithTimeout(ctx, p.host.cfg.CallTimeout)
	defer cancel()
	stderr := &headWriter{max: 4096}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize runs below, under guarded
		WithStderr(stderr).
		WithWalltime(constantWalltime, 1)
	mod, err := p.rt.InstantiateModule(ictx, p.compiled, cfg)
	if err != nil {
		return nil, p.classify(ictx, stderr, fmt.Errorf("start instance: %w", err))
	}
	p.instances.Add(1)
	p.live.Add(1)
	inst := &instance{
		live:         &p.live,
		mod:          mod,
		alloc:        mod.ExportedFunction("alloc"),
		describe:     mod.ExportedFunction("describe"),
		canonicalize: mod.ExportedFunction("canonicalize"),
		normalize:    mod.ExportedFunction("normalize"),
		stderr:       stderr,
	}
	if inst.normalize != nil && (len(inst.normalize.Definition().ParamTypes()) != 2 || len(inst.normalize.Definition().ResultTypes()) != 1) {
		inst.normalize = nil
	}
	if mod.Memory() == nil {
		inst.close(ctx)
		return nil, p.fail(ErrInvalid, "module exports no memory")
	}
	if p.instrumented {
		stop, ok := mod.ExportedGlobal(wasmstop.ExportName).(api.MutableGlobal)
		if !ok {
			inst.close(ctx)
			return nil, p.fail(ErrInvalid, "instrumented module exports no stop flag")
		}
		inst.stop = stop
	}
	initialize := mod.ExportedFunction("_initialize")
	if _, err := p.guarded(ctx, inst, func(ctx context.Context, inst *instance) (any, error) {
		if err := initialize.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, p.classify(ctx, inst.stderr, fmt.Errorf("start instance: %w", err))
		}
		return nil, nil
	}); err != nil {
		inst.close(ctx)
		return nil, err
	}
	return inst, nil
}

// describe starts the first instance, calls describe and parses it.
func (p *Plugin) describe(ctx context.Context) (Info, error) {
	v, err := p.with(ctx, false, func(ctx context.Context, inst *instance) (any, error) {
		if err := inst.describe.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call describe: %w", err))
		}
		raw, err := p.read(inst, inst.stack[0], 64<<10)
		if err != nil {
			return nil, err
		}
		return parseDescribe(p.source, raw)
	})
	info, _ := v.(Info)
	return info, err
}

// read returns a view of the packed (ptr<<32|len) region, at most max bytes.
func (p *Plugin) read(inst *instance, packed uint64, max int64) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	if int64(n) > max {
		return nil, p.fail(ErrOutput, "output of %d bytes exceeds the limit of %d bytes", n, max)
	}
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, p.fail(ErrOutput, "output region [%d, +%d) is outside linear memory", ptr, n)
	}
	return b, nil
}

// invoke writes signature into the instance, calls fn, decodes the result
// JSON into out and returns a copy of the <field>_ptr/<field>_len region it
// names (nil if it names none).
func (p *Plugin) invoke(ctx context.Context, inst *instance, fn api.Function, signature []byte, field string, out *resultJSON) ([]byte, error) {
	cfg := p.host.cfg
	if int64(len(signature)) > cfg.MaxInputBytes {
		return nil, p.fail(ErrInputTooLarge, "signature of %d bytes exceeds the plugin input limit of %d bytes", len(signature), cfg.MaxInputBytes)
	}
	// ABI.md: a buffer from alloc(n) serves every later input of at most n
	// bytes until the next alloc, so most calls skip alloc.
	if !inst.hasBuf || uint32(len(signature)) > inst.bufCap {
		want := max(uint32(len(signature)), 4096)
		inst.stack[0] = uint64(want)
		if err := inst.alloc.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call alloc: %w", err))
		}
		inst.bufPtr, inst.bufCap, inst.hasBuf = uint32(inst.stack[0]), want, true
	}
	ptr := inst.bufPtr
	if !inst.mod.Memory().Write(ptr, signature) {
		return nil, p.fail(ErrOutput, "alloc(%d) returned %d, outside linear memory", inst.bufCap, ptr)
	}
	inst.stack[0], inst.stack[1] = uint64(ptr), uint64(len(signature))
	if err := fn.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call %s: %w", fn.Definition().ExportNames()[0], err))
	}
	raw, err := p.read(inst, inst.stack[0], cfg.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, p.fail(ErrOutput, "result is not valid JSON: %v", err)
	}
	rptr, rlen, found, err := out.region(field)
	if err != nil {
		return nil, p.fail(ErrOutput, "result JSON: %v", err)
	}
	if !found {
		return nil, nil
	}
	if int64(rlen)+int64(len(raw)) > cfg.MaxOutputBytes {
		return nil, p.fail(ErrOutput, "output of %d bytes exceeds the limit of %d bytes", int64(rlen)+int64(len(raw)), cfg.MaxOutputBytes)
	}
	view, ok := inst.mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, p.fail(ErrOutput, "%s region [%d, +%d) is outside linear memory", field, rptr, rlen)
	}
	return bytes.Clone(view), nil
}

// resultJSON is any result JSON of ABI.md (canonicalize or normalize).
type resultJSON struct {
	Error         *string           `json:"error"`
	Unsupported   bool              `json:"unsupported"`
	CanonicalPtr  *uint32           `json:"canonical_ptr"`
	CanonicalLen  *uint32           `json:"canonical_len"`
	NormalizedPtr *uint32           `json:"normalized_ptr"`
	NormalizedLen *uint32           `json:"normalized_len"`
	Components    map[string]string `json:"components"`
	DisplayName   string            `json:"display_name"`
}

// region returns the <field>_ptr/<field>_len region; found is false if
// neither is present.
func (r *resultJSON) region(field string) (ptr, n uint32, found bool, err error) {
	pp, pl := r.CanonicalPtr, r.CanonicalLen
	if field == "normalized" {
		pp, pl = r.NormalizedPtr, r.NormalizedLen
	}
	if pp == nil && pl == nil {
		return 0, 0, false, nil
	}
	if pp == nil || pl == nil {
		return 0, 0, false, fmt.Errorf("%s_ptr and %s_len must come together", field, field)
	}
	return *pp, *pl, true, nil
}

func (p *Plugin) canonicalize(ctx context.Context, inst *instance, signature []byte) (Result, error) {
	var r resultJSON
	canonical, err := p.invoke(ctx, inst, inst.canonicalize, signature, "canonical", &r)
	if err != nil {
		return Result{}, err
	}
	if r.Error != nil {
		return Result{}, &Error{Plugin: p.info.ID, Kind: ErrPlugin, Message: boundMessage(*r.Error)}
	}
	if r.CanonicalLen == nil || canonical == nil {
		return Result{}, p.fail(ErrOutput, "result has neither canonical_ptr/canonical_len nor error")
	}
	if len(r.Components) > MaxComponents {
		return Result{}, p.fail(ErrOutput, "%d components exceed the limit of %d", len(r.Components), MaxComponents)
	}
	for k, v := range r.Components {
		if k == "" || len(k) > MaxComponentKeyBytes || len(v) > MaxComponentValueBytes {
			return Result{}, p.fail(ErrOutput, "component %.40q: names must be 1..%d bytes and values at most %d bytes",
				k, MaxComponentKeyBytes, MaxComponentValueBytes)
		}
	}
	if len(r.DisplayName) > MaxDisplayNameBytes {
		return Result{}, p.fail(ErrOutput, "display name of %d bytes exceeds the limit of %d", len(r.DisplayName), MaxDisplayNameBytes)
	}
	if r.Components == nil {
		r.Components = map[string]string{}
	}
	return Result{Canonical: canonical, Components: r.Components, DisplayName: r.DisplayName}, nil
}

// boundMessage keeps a plugin's own message readable and bounded.
func boundMessage(s string) string {
	const max = 1024
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if s == "" {
		s = "plugin rejected the signature without a message"
	}
	return s
}

// classify turns an error from a wasm call into an *Error.
func (p *Plugin) classify(ctx context.Context, stderr *headWriter, err error) error {
	tail := stderr.String()
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return p.fail(ErrTimeout, "did not finish within %s", p.host.cfg.CallTimeout)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("call plugin %s: %w", p.info.ID, context.Canceled)
		}
	}
	if strings.Contains(tail, "out of memory") {
		return p.fail(ErrMemory, "exceeded its memory limit of %d MiB: %s", p.host.cfg.MaxMemoryBytes>>20, lastLines(tail, 2))
	}
	msg := err.Error()
	if tail != "" {
		msg += "; stderr: " + lastLines(tail, 6)
	}
	return p.fail(ErrTrap, "%s", msg)
}

// lastLines returns up to n trailing non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var out []string
	for i := 0; i < len(lines) && len(out) < n; i++ {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

// headWriter keeps the first max bytes written to it (a Go panic prints its
// cause first; goroutine dumps follow).
type headWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *headWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (w *headWriter) reset() {
	w.mu.Lock()
	w.buf = w.buf[:0]
	w.mu.Unlock()
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
