// Package plugins runs cachesvc's canonicalization plugins: WebAssembly
// modules implementing the ABI in ABI.md, on wazero.
//
// A Host compiles each module once (with wazero's compilation cache on disk,
// so restarts are fast), keeps a bounded pool of live instances per plugin and
// bounds every call in memory, wall time, input and output. Every module is
// rewritten first (plugins/internal/wasmstop) so that the host can stop a
// call within microseconds; one it cannot rewrite runs under wazero's
// close-on-context-done instead (Info.Interrupt says which). A failing call
// returns an *Error naming the failure (ErrTimeout, ErrTrap, ErrMemory,
// ErrOutput, ErrBusy, ErrPlugin) and never takes the host down; an instance
// that failed is discarded and replaced on demand.
//
// Plugins get nothing from the outside world: no files, network,
// environment, arguments, real clock or real randomness.
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/cachesvc/cachesvc/plugins/internal/wasmstop"
)

// ABIVersion is the plugin ABI version this host implements.
const ABIVersion = 1

// Defaults for Config's zero values.
const (
	DefaultMaxMemoryBytes = 512 << 20
	DefaultCallTimeout    = 10 * time.Second
	DefaultMaxInputBytes  = 64 << 20
	DefaultMaxOutputBytes = 64 << 20
	DefaultAcquireTimeout = 5 * time.Second
	// MaxComponents bounds the number of components a plugin may return.
	MaxComponents = 64
	// MaxComponentKeyBytes and MaxComponentValueBytes bound each component.
	MaxComponentKeyBytes   = 128
	MaxComponentValueBytes = 256
	// MaxDisplayNameBytes bounds the display name.
	MaxDisplayNameBytes = 256
)

// Config configures a Host. The zero value of every field means its default.
type Config struct {
	// CacheDir keeps wazero's compiled code across restarts (for the server:
	// <data>/wasm-cache). Empty means compile in memory only.
	CacheDir string
	// MaxMemoryBytes caps each instance's linear memory; it is rounded down
	// to 64 KiB pages. 0 means DefaultMaxMemoryBytes.
	MaxMemoryBytes int64
	// CallTimeout bounds the wall time of one call. 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxInputBytes bounds a signature handed to a plugin. 0 means
	// DefaultMaxInputBytes.
	MaxInputBytes int64
	// MaxOutputBytes bounds the result JSON plus canonical bytes of one call.
	// 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// PoolSize bounds the live instances of each plugin (concurrent calls).
	// 0 means min(GOMAXPROCS, 4).
	PoolSize int
	// AcquireTimeout bounds how long a call waits for a free instance before
	// failing with ErrBusy. 0 means DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// Logger receives load and failure logs. Nil discards them.
	Logger *slog.Logger
	// WazeroInterrupt runs every plugin under wazero's close-on-context-done
	// instead of the host's own stop flag (see ABI.md, "Limits and
	// failures"). Both stop a call within microseconds; wazero's way exits
	// to Go at every loop iteration, which makes Go plugins several times
	// slower. For tests and benchmarks that compare the two; servers leave it
	// false.
	WazeroInterrupt bool
	// Observe, when set, is called after every call into a plugin with the
	// plugin's ID ("name@version"), the call's duration (including the wait
	// for an instance) and its error (nil on success). It must be cheap and
	// safe for concurrent use; the server exports it as metrics.
	Observe func(plugin string, d time.Duration, err error)
}

func (c Config) withDefaults() Config {
	if c.MaxMemoryBytes <= 0 {
		c.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxInputBytes <= 0 {
		c.MaxInputBytes = DefaultMaxInputBytes
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.PoolSize <= 0 {
		c.PoolSize = min(runtime.GOMAXPROCS(0), 4)
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = DefaultAcquireTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Info describes a loaded plugin.
type Info struct {
	// Name comes from describe.
	Name string `json:"name"`
	// Version comes from describe.
	Version string `json:"version"`
	// ID is "name@version", hashed into every key.
	ID string `json:"id"`
	// ABI is the ABI version the plugin implements.
	ABI int `json:"abi"`
	// Backends are the signature backend values the plugin handles.
	Backends []string `json:"backends"`
	// Reads lists the signature fields the plugin reads.
	Reads []string `json:"reads"`
	// Source is "builtin:NAME.wasm" or the file the plugin was loaded from.
	Source string `json:"source"`
	// Interrupt names how the host stops a call past its time limit:
	// InterruptInstrumented or InterruptWazero.
	Interrupt string `json:"interrupt"`
	// SHA256 is the hex SHA-256 of the module bytes as loaded: one
	// name@version built from other code keys signatures differently.
	SHA256 string `json:"sha256,omitempty"`
}

// Values of Info.Interrupt.
const (
	// InterruptInstrumented: the host added a stop flag to the module
	// (plugins/internal/wasmstop) and sets it to end a call.
	InterruptInstrumented = "instrumented"
	// InterruptWazero: wazero's close-on-context-done ends a call; the
	// module could not be instrumented, or Config.WazeroInterrupt is set.
	InterruptWazero = "wazero"
)

// Host loads plugins and routes backends to them. It is safe for concurrent
// use.
type Host struct {
	cfg      Config
	rt       wazero.Runtime // instrumented modules: no termination checks
	rtWazero wazero.Runtime // the rest: close-on-context-done
	cache    wazero.CompilationCache

	mu        sync.RWMutex
	closed    bool
	byName    map[string]*Plugin
	byBackend map[string]*Plugin
	fromDir   map[string]*Plugin // by source path: loaded by LoadDir or ReloadDir

	reloadMu sync.Mutex // one LoadDir or ReloadDir at a time

	// Modules registered by DeferBuiltins, compiled on first use.
	pendMu  sync.Mutex
	pending []pendingModule
	pendErr error
}

type pendingModule struct {
	source string
	wasm   []byte
}

// NewHost returns a Host with no plugins loaded.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	cfg = cfg.withDefaults()
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(min(cfg.MaxMemoryBytes>>16, 65536)))
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("create wasm cache dir: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("open wasm cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
		rc = rc.WithCompilationCache(c)
	}
	// Both runtimes share the cache: wazero keys compiled code on the
	// module bytes and on close-on-context-done.
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	rtWazero := wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(true))
	for _, r := range []wazero.Runtime{rt, rtWazero} {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
			rt.Close(ctx)
			rtWazero.Close(ctx)
			if cache != nil {
				cache.Close(ctx)
			}
			return nil, fmt.Errorf("instantiate wasi: %w", err)
		}
	}
	return &Host{
		cfg:       cfg,
		rt:        rt,
		rtWazero:  rtWazero,
		cache:     cache,
		byName:    map[string]*Plugin{},
		byBackend: map[string]*Plugin{},
		fromDir:   map[string]*Plugin{},
	}, nil
}

// Config returns the host's configuration with defaults filled in.
func (h *Host) Config() Config { return h.cfg }

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
)

// Compile validates wasm as an ABI 1 plugin and returns it ready to call,
// without registering it with the host (plugin check uses this directly).
// source names where it came from, for messages.
//
// # Errors
//
// ErrMemory (wrapped) if the memory it declares is over
// Config.MaxMemoryBytes; ErrInvalid if the module does not compile, imports anything but
// WASI preview 1, lacks an export, fails to start or describes itself
// wrongly; ErrClosed if the host is closed. A module that compiles but
// cannot be instrumented is not an error: it loads with Info.Interrupt
// InterruptWazero, and the host logs a warning.
func (h *Host) Compile(ctx context.Context, source string, wasm []byte) (*Plugin, error) {
	code, rt, interrupt, why := h.prepare(wasm)
	h.mu.RLock()
	closed := h.closed
	h.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	cm, err := rt.CompileModule(ctx, code)
	if err != nil && strings.Contains(err.Error(), "over limit of") {
		// wazero's "section memory: min N pages over limit of M pages": the
		// module is fine, the limit (MaxMemoryBytes) is too small for it.
		return nil, fmt.Errorf("compile plugin %s: it needs more memory to start than the limit of %d bytes per instance allows (%w): %w",
			source, h.cfg.MaxMemoryBytes, ErrMemory, err)
	}
	if err != nil {
		return nil, fmt.Errorf("compile plugin %s: %w: %w", source, ErrInvalid, err)
	}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasi_snapshot_preview1.ModuleName {
			cm.Close(ctx)
			return nil, fmt.Errorf("compile plugin %s: %w: imports %s.%s; only %s is provided",
				source, ErrInvalid, mod, name, wasi_snapshot_preview1.ModuleName)
		}
	}
	exports := cm.ExportedFunctions()
	for _, want := range []struct {
		name    string
		params  int
		results int
	}{{"_initialize", 0, 0}, {"alloc", 1, 1}, {"describe", 0, 1}, {"canonicalize", 2, 1}} {
		f, ok := exports[want.name]
		if !ok || len(f.ParamTypes()) != want.params || len(f.ResultTypes()) != want.results {
			cm.Close(ctx)
			return nil, fmt.Errorf("compile plugin %s: %w: missing or mistyped export %q (see plugins/ABI.md)",
				source, ErrInvalid, want.name)
		}
	}
	p := &Plugin{host: h, compiled: cm, rt: rt, source: source, instrumented: interrupt == InterruptInstrumented}
	p.closing, p.close = context.WithCancel(context.Background())
	p.info.ID = source // until described, errors name the source
	p.digest = sha256.Sum256(wasm)
	p.codeHex = hex.EncodeToString(p.digest[:])
	p.idle = make(chan *instance, h.cfg.PoolSize)
	p.slots = make(chan struct{}, h.cfg.PoolSize)
	info, err := p.describe(ctx)
	if err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("load plugin %s: %w", source, err)
	}
	info.Interrupt = interrupt
	p.info = info
	if why != nil {
		h.cfg.Logger.Warn("plugin cannot be instrumented; it runs under wazero's slower close-on-context-done",
			"plugin", info.ID, "source", source, "reason", why.Error())
	}
	return p, nil
}

// prepare returns the bytes to compile for wasm, the runtime to compile
// them on and the resulting Info.Interrupt; why is the reason Instrument
// refused wasm (nil if it did not, or was not asked).
func (h *Host) prepare(wasm []byte) (code []byte, rt wazero.Runtime, interrupt string, why error) {
	if h.cfg.WazeroInterrupt {
		return wasm, h.rtWazero, InterruptWazero, nil
	}
	code, err := wasmstop.Instrument(wasm)
	if err != nil {
		return wasm, h.rtWazero, InterruptWazero, err
	}
	return code, h.rt, InterruptInstrumented, nil
}

// Precompile compiles wasm into the compilation cache (if the host has one)
// without instantiating it: exactly the bytes, on exactly the runtime, that
// Compile would use (the instrumented module, unless it cannot be
// instrumented or Config.WazeroInterrupt is set).
func (h *Host) Precompile(ctx context.Context, wasm []byte) error {
	code, rt, _, _ := h.prepare(wasm)
	cm, err := rt.CompileModule(ctx, code)
	if err != nil {
		return fmt.Errorf("compile plugin: %w: %w", ErrInvalid, err)
	}
	if err := cm.Close(ctx); err != nil {
		return fmt.Errorf("compile plugin: %w", err)
	}
	return nil
}

// Load compiles wasm and registers it under its name and backends.
//
// # Errors
//
// Those of Compile, and ErrDuplicate (wrapped) if its name or a backend is
// already taken.
func (h *Host) Load(ctx context.Context, source string, wasm []byte) (*Plugin, error) {
	p, err := h.Compile(ctx, source, wasm)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		p.Close(ctx)
		return nil, ErrClosed
	}
	if err := register(h.byName, h.byBackend, p); err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("load plugin %s: %w", source, err)
	}
	h.cfg.Logger.Info("plugin loaded", "plugin", p.info.ID, "backends", p.info.Backends, "source", source, "interrupt", p.info.Interrupt)
	return p, nil
}

// register routes p's name and backends to it in byName and byBackend, or
// returns ErrDuplicate (wrapped) naming the plugin that already holds one.
func register(byName, byBackend map[string]*Plugin, p *Plugin) error {
	if _, err := conflict(byName, byBackend, p); err != nil {
		return err
	}
	byName[p.info.Name] = p
	for _, b := range p.info.Backends {
		byBackend[b] = p
	}
	return nil
}

// LoadDir loads every *.wasm file in dir, in name order. It stops at the
// first failure, naming the file. The plugins it loads are the ones a later
// ReloadDir replaces.
func (h *Host) LoadDir(ctx context.Context, dir string) ([]*Plugin, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	matches, err := listDir(dir)
	if err != nil {
		return nil, err
	}
	var loaded []*Plugin
	for _, path := range matches {
		wasm, err := os.ReadFile(path)
		if err != nil {
			return loaded, fmt.Errorf("read plugin: %w", err)
		}
		p, err := h.Load(ctx, path, wasm)
		if err != nil {
			return loaded, err
		}
		h.mu.Lock()
		if h.byName[p.info.Name] == p {
			h.fromDir[path] = p
		}
		h.mu.Unlock()
		loaded = append(loaded, p)
	}
	return loaded, nil
}

// listDir returns the *.wasm files in dir, sorted. A dir that is a file
// (the likeliest slip: the path of the plugin itself) is an error, not an
// empty directory that would leave the plugin silently unloaded.
func listDir(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open plugin dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("plugin dir %s is a file, not a directory: give the directory that holds the *.wasm plugins (here %s)", dir, filepath.Dir(dir))
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		return nil, fmt.Errorf("list plugins in %s: %w", dir, err)
	}
	sort.Strings(matches)
	return matches, nil
}

// Ready loads the modules DeferBuiltins registered, once; it returns the
// error that loading them met (every later call returns it too).
func (h *Host) Ready() error {
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for len(h.pending) > 0 && h.pendErr == nil {
		pm := h.pending[0]
		h.pending = h.pending[1:]
		if _, err := h.Load(context.Background(), pm.source, pm.wasm); err != nil {
			h.pendErr = err
		}
	}
	return h.pendErr
}

// Pending reports, without blocking, whether modules registered by
// DeferBuiltins have not finished loading: they are still compiling, or
// loading them failed (Ready returns why). Readiness probes use it.
func (h *Host) Pending() bool {
	if !h.pendMu.TryLock() {
		return true // Ready holds the lock while it compiles
	}
	defer h.pendMu.Unlock()
	return len(h.pending) > 0 || h.pendErr != nil
}

// Compiling reports, without blocking, whether Ready is compiling the
// modules DeferBuiltins registered right now. A server stopping then need
// not wait for the compile (Close would: seconds, a minute on a loaded
// host): the compilation cache keeps only whole modules, each written to a
// temporary file renamed into place, so the next start compiles what did
// not finish.
func (h *Host) Compiling() bool {
	if !h.pendMu.TryLock() {
		return true // Ready holds the lock while it compiles
	}
	h.pendMu.Unlock()
	return false
}

// conflict returns the plugin in byName or byBackend that already holds
// p's name or one of its backends, and ErrDuplicate (wrapped) naming it; nil
// and nil when p can be registered beside them.
func conflict(byName, byBackend map[string]*Plugin, p *Plugin) (*Plugin, error) {
	if other, ok := byName[p.info.Name]; ok {
		return other, fmt.Errorf("%w: name %q is taken by %s (%s)", ErrDuplicate, p.info.Name, other.info.ID, other.source)
	}
	for _, b := range p.info.Backends {
		if other, ok := byBackend[b]; ok {
			return other, fmt.Errorf("%w: backend %q is handled by %s (%s)", ErrDuplicate, b, other.info.ID, other.source)
		}
	}
	return nil, nil
}

// LoadErr returns, without blocking, the error that loading the modules
// DeferBuiltins registered met (the one Ready returns); nil while they
// are still compiling, once they have loaded, or when none were deferred.
func (h *Host) LoadErr() error {
	if !h.pendMu.TryLock() {
		return nil // Ready holds the lock while it compiles
	}
	defer h.pendMu.Unlock()
	return h.pendErr
}

// ForBackend returns the plugin handling backend, if any. It loads deferred
// built-ins first (see Ready).
func (h *Host) ForBackend(backend string) (*Plugin, bool) {
	_ = h.Ready()
	h.mu.RLock()
	defer h.mu.RUnlock()
	p, ok := h.byBackend[backend]
	return p, ok
}

// Backends returns the known backends, sorted.
func (h *Host) Backends() []string {
	_ = h.Ready()
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.byBackend))
	for b := range h.byBackend {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

// Plugins describes the loaded plugins, sorted by name.
func (h *Host) Plugins() []Info {
	_ = h.Ready()
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]Info, 0, len(h.byName))
	for _, p := range h.byName {
		out = append(out, p.Info())
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close closes every plugin and the runtime. In-flight calls fail.
func (h *Host) Close(ctx context.Context) error {
	h.pendMu.Lock() // not while a deferred load compiles
	h.pending = nil
	h.pendMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps := h.byName
	h.byName, h.byBackend, h.fromDir = map[string]*Plugin{}, map[string]*Plugin{}, map[string]*Plugin{}
	h.mu.Unlock()
	for _, p := range ps {
		p.Close(ctx)
	}
	err := errors.Join(h.rt.Close(ctx), h.rtWazero.Close(ctx))
	if h.cache != nil {
		err = errors.Join(err, h.cache.Close(ctx))
	}
	if err != nil {
		return fmt.Errorf("close plugin host: %w", err)
	}
	return nil
}

// describeJSON is the describe document of ABI.md.
type describeJSON struct {
	ABI      int      `json:"abi"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Backends []string `json:"backends"`
	Reads    []string `json:"reads"`
}

func parseDescribe(source string, b []byte) (Info, error) {
	var d describeJSON
	if err := json.Unmarshal(b, &d); err != nil {
		return Info{}, fmt.Errorf("%w: describe is not JSON: %w", ErrInvalid, err)
	}
	if d.ABI != ABIVersion {
		return Info{}, fmt.Errorf("%w: plugin implements abi %d; this host implements abi %d", ErrInvalid, d.ABI, ABIVersion)
	}
	if !namePattern.MatchString(d.Name) {
		return Info{}, fmt.Errorf("%w: name %q does not match %s", ErrInvalid, d.Name, namePattern)
	}
	if !versionPattern.MatchString(d.Version) {
		return Info{}, fmt.Errorf("%w: version %q does not match %s", ErrInvalid, d.Version, versionPattern)
	}
	if len(d.Backends) == 0 {
		return Info{}, fmt.Errorf("%w: describe lists no backends", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, b := range d.Backends {
		if !namePattern.MatchString(b) {
			return Info{}, fmt.Errorf("%w: backend %q does not match %s", ErrInvalid, b, namePattern)
		}
		if seen[b] {
			return Info{}, fmt.Errorf("%w: backend %q listed twice", ErrInvalid, b)
		}
		seen[b] = true
	}
	if d.Reads == nil {
		d.Reads = []string{}
	}
	return Info{
		Name: d.Name, Version: d.Version, ID: d.Name + "@" + d.Version, ABI: d.ABI,
		Backends: d.Backends, Reads: d.Reads, Source: source,
	}, nil
}
