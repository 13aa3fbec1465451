package plugins

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins/internal/wasmstop"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// testPlugins are the prebuilt modules in testdata (see scripts/build-plugins.sh).
var testPlugins = []string{"empty", "faults", "nondet"}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatalf("read test plugin: %v (run scripts/build-plugins.sh)", err)
	}
	return b
}

// newTestHost returns a host with the named test plugins (default: all) and
// the built-ins loaded ("builtin" among names loads only the built-ins).
func newTestHost(t testing.TB, cfg Config, names ...string) *Host {
	t.Helper()
	ctx := context.Background()
	cfg.CacheDir = testCacheDir(t)
	h, err := NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if len(names) == 0 {
		names = append([]string{"builtin"}, testPlugins...)
	}
	for _, name := range names {
		if name == "builtin" {
			if err := h.LoadBuiltins(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := h.Load(ctx, name+".wasm", readTestdata(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func testCacheDir(t testing.TB) string {
	var files []string
	for _, name := range testPlugins {
		files = append(files, filepath.Join("testdata", name+".wasm"))
	}
	return pluginstest.CacheDir(t, files...)
}

func mustPlugin(t testing.TB, h *Host, backend string) *Plugin {
	t.Helper()
	p, ok := h.ForBackend(backend)
	if !ok {
		t.Fatalf("no plugin for backend %q; have %v", backend, h.Backends())
	}
	return p
}

func TestPassthrough(t *testing.T) {
	h := newTestHost(t, Config{})
	p := mustPlugin(t, h, "passthrough")
	if p.ID() != "passthrough@1.0.0" {
		t.Fatalf("ID = %q", p.ID())
	}
	tests := []struct {
		name      string
		sig       string
		canonical string
		errText   string // non-empty: ErrPlugin containing this
	}{
		{"jax key", `{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`, "jax\x00jit_f-0a1b", ""},
		{"field order irrelevant", `{"key":"jit_f-0a1b","kind":"jax","backend":"passthrough"}`, "jax\x00jit_f-0a1b", ""},
		{"pt2", `{"backend":"passthrough","kind":"pt2","key":"pt2:abc"}`, "pt2\x00pt2:abc", ""},
		{"missing kind", `{"backend":"passthrough","key":"k"}`, "", "kind is required"},
		{"missing key", `{"backend":"passthrough","kind":"jax"}`, "", "key is required"},
		{"bad kind", `{"backend":"passthrough","kind":"JAX","key":"k"}`, "", "must match"},
		{"control byte in key", `{"backend":"passthrough","kind":"jax","key":"a\u0000b"}`, "", "printable ASCII"},
		{"long key", `{"backend":"passthrough","kind":"jax","key":"` + strings.Repeat("k", 4097) + `"}`, "", "at most 4096"},
		{"unknown field", `{"backend":"passthrough","kind":"jax","key":"k","extra":1}`, "", `unknown field "extra"`},
		{"not an object", `[1,2]`, "", "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Canonicalize(context.Background(), []byte(tt.sig))
			if tt.errText != "" {
				if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v; want ErrPlugin containing %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Canonical) != tt.canonical {
				t.Fatalf("canonical = %q; want %q", res.Canonical, tt.canonical)
			}
			if res.Components["kind"] == "" || res.DisplayName == "" {
				t.Fatalf("components %v, display %q", res.Components, res.DisplayName)
			}
		})
	}
}

// TestFaults runs each misbehaviour of the faults plugin and checks that it
// fails with its precise error, that the failing instance is replaced, and
// that other plugins keep answering while it happens; under both stop
// mechanisms (the host's instrumented flag and wazero's close-on-context-
// done).
func TestFaults(t *testing.T) {
	for _, wazeroInterrupt := range []bool{false, true} {
		name := InterruptInstrumented
		if wazeroInterrupt {
			name = InterruptWazero
		}
		t.Run(name, func(t *testing.T) { testFaults(t, wazeroInterrupt) })
	}
}

func testFaults(t *testing.T, wazeroInterrupt bool) {
	// quick fails fast on the infinite loop; patient gives the other faults
	// time to happen on a loaded machine (a fresh instance under -race can
	// take over a second to start), so they fail by their own kind, never by
	// the timeout; roomy gives memory growth and the 100 MB output room to
	// hit their own limits.
	quick := newTestHost(t, Config{CallTimeout: time.Second, PoolSize: 2, WazeroInterrupt: wazeroInterrupt}, "empty", "faults")
	patient := newTestHost(t, Config{CallTimeout: time.Minute, PoolSize: 2, WazeroInterrupt: wazeroInterrupt}, "empty", "faults")
	roomy := newTestHost(t, Config{CallTimeout: time.Minute, MaxMemoryBytes: 192 << 20, MaxOutputBytes: 64 << 20, PoolSize: 2, WazeroInterrupt: wazeroInterrupt}, "empty", "faults")
	tests := []struct {
		mode    string
		host    *Host
		kind    error
		text    string
		discard bool
	}{
		{"error", patient, ErrPlugin, "rejected on purpose", false},
		{"loop", quick, ErrTimeout, "did not finish within 1s", true},
		{"grow", roomy, ErrMemory, "memory limit of 192 MiB", true},
		{"trap", patient, ErrTrap, "deliberate panic", true},
		{"exit", patient, ErrTrap, "exit_code(3)", true},
		{"nilderef", patient, ErrTrap, "nil pointer", true},
		{"big", roomy, ErrOutput, "exceeds the limit of 67108864 bytes", true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			faults := mustPlugin(t, tt.host, "faults")
			empty := mustPlugin(t, tt.host, "empty")
			if want := map[bool]string{false: InterruptInstrumented, true: InterruptWazero}[wazeroInterrupt]; faults.Info().Interrupt != want {
				t.Fatalf("interrupt = %q; want %q", faults.Info().Interrupt, want)
			}
			_, discardedBefore := faults.Stats()
			// Others keep being served while the fault happens.
			stop := make(chan struct{})
			var served sync.WaitGroup
			served.Add(1)
			var otherErr error
			go func() {
				defer served.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := empty.Canonicalize(context.Background(), []byte(`{"backend":"empty"}`)); err != nil {
						otherErr = err
						return
					}
				}
			}()
			start := time.Now()
			_, err := faults.Canonicalize(context.Background(), []byte(`{"backend":"faults","mode":"`+tt.mode+`"}`))
			elapsed := time.Since(start)
			close(stop)
			served.Wait()
			if otherErr != nil {
				t.Fatalf("empty plugin failed during fault: %v", otherErr)
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v; want %v containing %q", err, tt.kind, tt.text)
			}
			if tt.mode == "loop" && elapsed > tt.host.cfg.CallTimeout+5*time.Second {
				t.Errorf("loop stopped after %s; limit %s", elapsed, tt.host.cfg.CallTimeout)
			}
			if _, discarded := faults.Stats(); (discarded > discardedBefore) != tt.discard {
				t.Errorf("instance discarded = %v; want %v", discarded > discardedBefore, tt.discard)
			}
			// The faulting plugin itself recovers on a fresh instance.
			res, err := faults.Canonicalize(context.Background(), []byte(`{"backend":"faults","mode":"ok"}`))
			if err != nil || res.DisplayName != "ok" {
				t.Fatalf("after %s: %v %+v", tt.mode, err, res)
			}
		})
	}
}

func TestBusy(t *testing.T) {
	h := newTestHost(t, Config{CallTimeout: 2 * time.Second, PoolSize: 1, AcquireTimeout: 20 * time.Millisecond}, "faults")
	faults := mustPlugin(t, h, "faults")
	done := make(chan error)
	go func() {
		_, err := faults.Canonicalize(context.Background(), []byte(`{"mode":"loop"}`))
		done <- err
	}()
	// Wait until the looping call holds the only instance.
	var err error
	for i := 0; i < 1000; i++ {
		_, err = faults.Canonicalize(context.Background(), []byte(`{"mode":"ok"}`))
		if err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v; want ErrBusy", err)
	}
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("loop err = %v; want ErrTimeout", err)
	}
	if _, err := faults.Canonicalize(context.Background(), []byte(`{"mode":"ok"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestInputTooLarge(t *testing.T) {
	h := newTestHost(t, Config{MaxInputBytes: 100}, "empty")
	_, err := mustPlugin(t, h, "empty").Canonicalize(context.Background(), make([]byte, 101))
	if !errors.Is(err, ErrInputTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestCallerCancel(t *testing.T) {
	h := newTestHost(t, Config{CallTimeout: 10 * time.Second}, "faults")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := mustPlugin(t, h, "faults").Canonicalize(ctx, []byte(`{"mode":"loop"}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	h := newTestHost(t, Config{PoolSize: 3}, "builtin")
	p := mustPlugin(t, h, "passthrough")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				key := strings.Repeat("k", g+1)
				res, err := p.Canonicalize(context.Background(), []byte(`{"backend":"passthrough","kind":"t","key":"`+key+`"}`))
				if err != nil {
					errs <- err
					return
				}
				if string(res.Canonical) != "t\x00"+key {
					errs <- errors.New("wrong canonical " + string(res.Canonical))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if started, _ := p.Stats(); started > 3 {
		t.Fatalf("started %d instances; pool size is 3", started)
	}
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, Config{})
	tests := []struct {
		name string
		wasm []byte
		kind error
		text string
	}{
		{"garbage", []byte("not wasm at all"), ErrInvalid, "compile plugin"},
		{"duplicate name", readTestdata(t, "empty"), ErrDuplicate, `name "empty" is taken`},
		{"duplicate builtin", mustBuiltin(t, "passthrough.wasm"), ErrDuplicate, `name "passthrough"`},
		{"foreign import", wasmImportingEnv(), ErrInvalid, "imports env.f"},
		{"missing export", wasmNoExports(), ErrInvalid, `export "_initialize"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(ctx, tt.name, tt.wasm)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v; want %v containing %q", err, tt.kind, tt.text)
			}
		})
	}
	if got := strings.Join(h.Backends(), ","); !strings.Contains(got, "empty,faults,nondet,passthrough") {
		t.Fatalf("backends = %s", got)
	}
	// A limit below what a module declares it needs at start is the
	// limit's fault, not the module's: ErrMemory, naming the limit.
	tiny, err := NewHost(ctx, Config{CacheDir: testCacheDir(t), MaxMemoryBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close(ctx)
	_, err = tiny.Load(ctx, "passthrough", mustBuiltin(t, "passthrough.wasm"))
	if !errors.Is(err, ErrMemory) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the limit of 65536 bytes per instance") {
		t.Fatalf("load under a 64 KiB limit: %v; want ErrMemory naming the limit", err)
	}
}

func mustBuiltin(t *testing.T, name string) []byte {
	mods, _ := Builtins()
	b, ok := mods[name]
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	return b
}

// wasmNoExports is the smallest valid module.
func wasmNoExports() []byte { return []byte{0, 'a', 's', 'm', 1, 0, 0, 0} }

// wasmImportingEnv imports env.f: () -> ().
func wasmImportingEnv() []byte {
	return []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type section: () -> ()
		2, 9, 1, 3, 'e', 'n', 'v', 1, 'f', 0, 0, // import env.f func type 0
	}
}

func TestLoadDirAndCompilationCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cache := testCacheDir(t)
	if err := os.WriteFile(filepath.Join(dir, "empty.wasm"), readTestdata(t, "empty"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		h, err := NewHost(ctx, Config{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		ps, err := h.LoadDir(ctx, dir)
		if err != nil || len(ps) != 1 || ps[0].Info().Source != filepath.Join(dir, "empty.wasm") {
			t.Fatalf("LoadDir: %v %v", ps, err)
		}
		h.Close(ctx)
	}
	entries, err := os.ReadDir(cache)
	if err != nil || len(entries) == 0 {
		t.Fatalf("compilation cache %s is empty: %v", cache, err)
	}
	if _, err := (&Host{}).LoadDir(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("LoadDir of a missing dir succeeded")
	}
	// The plugin's own path where its directory goes must not load nothing
	// in silence.
	file := filepath.Join(dir, "empty.wasm")
	if ps, err := (&Host{}).LoadDir(ctx, file); err == nil || !strings.Contains(err.Error(), "is a file, not a directory") {
		t.Fatalf("LoadDir(%s) = %v, %v; want a not-a-directory error", file, ps, err)
	}
}

func TestFreshInstanceIsolation(t *testing.T) {
	h := newTestHost(t, Config{PoolSize: 1}, "nondet")
	p := mustPlugin(t, h, "nondet")
	ctx := context.Background()
	a, _ := p.Canonicalize(ctx, []byte("x"))
	b, _ := p.Canonicalize(ctx, []byte("x"))
	if string(a.Canonical) == string(b.Canonical) {
		t.Fatalf("nondet plugin looked deterministic on one instance: %q", a.Canonical)
	}
	f1, _ := p.CanonicalizeFresh(ctx, []byte("x"))
	f2, _ := p.CanonicalizeFresh(ctx, []byte("x"))
	if string(f1.Canonical) != string(f2.Canonical) || string(f1.Canonical) != "x1" {
		t.Fatalf("fresh instances differ: %q %q", f1.Canonical, f2.Canonical)
	}
}

// TestStopMechanisms checks which plugins are instrumented: all the
// committed ones by default, none with WazeroInterrupt.
func TestStopMechanisms(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{{Config{}, InterruptInstrumented}, {Config{WazeroInterrupt: true}, InterruptWazero}} {
		h := newTestHost(t, tt.cfg)
		for _, i := range h.Plugins() {
			if i.Interrupt != tt.want {
				t.Errorf("%s (WazeroInterrupt %v): interrupt %q; want %q", i.ID, tt.cfg.WazeroInterrupt, i.Interrupt, tt.want)
			}
		}
	}
}

// TestCallerCancelStopsPromptly: a caller that goes away mid-call stops the
// instrumented instance within moments, far inside the call timeout, and
// the instance is replaced.
func TestCallerCancelStopsPromptly(t *testing.T) {
	for _, wazeroInterrupt := range []bool{false, true} {
		h := newTestHost(t, Config{CallTimeout: time.Hour, PoolSize: 1, WazeroInterrupt: wazeroInterrupt}, "faults")
		p := mustPlugin(t, h, "faults")
		if _, err := p.Canonicalize(context.Background(), []byte(`{"mode":"ok"}`)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancelled = time.Now()
			cancel()
		}()
		_, err := p.Canonicalize(ctx, []byte(`{"mode":"loop"}`))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 5*time.Second {
			t.Errorf("WazeroInterrupt %v: stopped %s after the cancel", wazeroInterrupt, d)
		}
		if _, discarded := p.Stats(); discarded != 1 {
			t.Errorf("discarded = %d; want 1", discarded)
		}
		if res, err := p.Canonicalize(context.Background(), []byte(`{"mode":"ok"}`)); err != nil || res.DisplayName != "ok" {
			t.Fatalf("after cancel: %v %+v", err, res)
		}
	}
}

// TestCloseStopsRunningCall: closing a plugin stops an instrumented call
// that would otherwise run until its (hour-long) timeout.
func TestCloseStopsRunningCall(t *testing.T) {
	h := newTestHost(t, Config{CallTimeout: time.Hour}, "faults")
	p := mustPlugin(t, h, "faults")
	started, _ := p.Stats()
	done := make(chan error, 1)
	go func() {
		_, err := p.Canonicalize(context.Background(), []byte(`{"mode":"loop"}`))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	p.Close(context.Background())
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v; want ErrClosed (started %d instances before)", err, started)
		}
	case <-time.After(time.Minute):
		t.Fatal("the looping call survived Close")
	}
}

// TestStoppedInstanceNeverReused: when the timer sets the flag but the call
// still succeeds (it was past its last loop), the result stands and the
// instance, whose flag is set, is discarded rather than pooled.
func TestStoppedInstanceNeverReused(t *testing.T) {
	// The timeout also bounds starting a fresh instance (the Go runtime's
	// start-up in wasm), which takes far longer than 50 ms under -race on
	// a loaded machine: keep it well above that.
	const timeout = 2 * time.Second
	h := newTestHost(t, Config{CallTimeout: timeout, PoolSize: 1}, "faults")
	p := mustPlugin(t, h, "faults")
	ctx := context.Background()
	if _, err := p.Canonicalize(ctx, []byte(`{"mode":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	startedBefore, discardedBefore := p.Stats()
	var stopped *instance
	v, err := p.with(ctx, false, func(ctx context.Context, inst *instance) (any, error) {
		stopped = inst
		time.Sleep(timeout + 300*time.Millisecond) // the timer fires meanwhile
		return "done", nil
	})
	if err != nil || v != "done" {
		t.Fatalf("with = %v, %v; want the call's own result", v, err)
	}
	if stopped.stop.Get() != 1 || !stopped.stopped {
		t.Fatalf("flag = %d, stopped = %v; want the flag set", stopped.stop.Get(), stopped.stopped)
	}
	if _, discarded := p.Stats(); discarded != discardedBefore+1 {
		t.Fatalf("discarded %d; want %d", discarded, discardedBefore+1)
	}
	if _, err := p.Canonicalize(ctx, []byte(`{"mode":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	if started, _ := p.Stats(); started != startedBefore+1 {
		t.Fatalf("started %d instances; want %d (a fresh one after the stopped one)", started, startedBefore+1)
	}
}

// TestUninstrumentableFallsBack: a module Instrument refuses runs under
// wazero's mechanism; a module whose code names a global it does not have
// (it could clear the stop flag once instrumented) does not load at all.
func TestUninstrumentableFallsBack(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, Config{}, "empty")
	p, err := h.Compile(ctx, "faults.wasm", withExport(readTestdata(t, "faults"), wasmstop.ExportName))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if p.Info().Interrupt != InterruptWazero {
		t.Fatalf("interrupt = %q; want %q", p.Info().Interrupt, InterruptWazero)
	}
	if res, err := p.Canonicalize(ctx, []byte(`{"mode":"ok"}`)); err != nil || res.DisplayName != "ok" {
		t.Fatalf("fallback plugin: %v %+v", err, res)
	}
	bad := []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type () -> ()
		3, 2, 1, 0, // one function
		6, 6, 1, 0x7f, 0x00, 0x41, 0x07, 0x0b, // one global: i32 7
		10, 8, 1, 6, 0, 0x41, 0x00, 0x24, 0x01, 0x0b, // global.set 1
	}
	if _, err := h.Load(ctx, "bad.wasm", bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("module setting global 1 of 1: %v; want ErrInvalid", err)
	}
}

// withExport appends an export of memory 0 named name to wasm's export
// section (wasm must have one, after which comes no section but code,
// data and custom ones).
func withExport(wasm []byte, name string) []byte {
	r := 8
	for r < len(wasm) {
		id := wasm[r]
		size, n := binary.Uvarint(wasm[r+1:])
		content := wasm[r+1+n : r+1+n+int(size)]
		if id == 7 {
			count, m := binary.Uvarint(content)
			c := binary.AppendUvarint(nil, count+1)
			c = append(c, content[m:]...)
			c = append(binary.AppendUvarint(c, uint64(len(name))), name...)
			c = append(c, 2, 0) // memory 0
			out := append([]byte(nil), wasm[:r]...)
			out = append(out, 7)
			out = binary.AppendUvarint(out, uint64(len(c)))
			out = append(out, c...)
			return append(out, wasm[r+1+n+int(size):]...)
		}
		r += 1 + n + int(size)
	}
	panic("no export section")
}

// TestDeferredBuiltinsPending checks that Pending reports deferred built-ins
// until Ready has loaded them, so /readyz can wait for the first compile.
func TestDeferredBuiltinsPending(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(ctx, Config{CacheDir: testCacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if h.Pending() {
		t.Fatal("Pending before DeferBuiltins = true, want false")
	}
	h.DeferBuiltins()
	if !h.Pending() {
		t.Fatal("Pending after DeferBuiltins = false, want true")
	}
	if err := h.Ready(); err != nil {
		t.Fatal(err)
	}
	if h.Pending() {
		t.Fatal("Pending after Ready = true, want false")
	}
	if _, ok := h.ForBackend("passthrough"); !ok {
		t.Fatal("passthrough not loaded by Ready")
	}
}

// TestPrintable: a plugin's message and display name reach terminals and
// logs, where ESC, NUL or bytes that are not UTF-8 would be interpreted
// (plugin check printed them raw); line breaks become spaces.
func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"module is not StableHLO", "module is not StableHLO"},
		{"bad\x1b[2Jinput\x00", "bad\uFFFD[2Jinput\uFFFD"},
		{"line one\nline two\tend", "line one line two end"},
		{"caf\xe9", "caf\uFFFD"},
		{"jit_train_step ✓", "jit_train_step ✓"},
		{"c1\u0085x", "c1\uFFFDx"},
	} {
		if got := printable(tc.in); got != tc.want {
			t.Errorf("printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
