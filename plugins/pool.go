package plugins

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/cachesvc/cachesvc/plugins/internal/wasmstop"
)

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
