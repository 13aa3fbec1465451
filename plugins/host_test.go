package plugins

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
// that other plugins keep answering while it happens.
func TestFaults(t *testing.T) {
	// quick fails fast on the infinite loop; patient gives the other faults
	// time to happen on a loaded machine (a fresh instance under -race can
	// take over a second to start), so they fail by their own kind, never by
	// the timeout; roomy gives memory growth and the 100 MB output room to
	// hit their own limits.
	quick := newTestHost(t, Config{CallTimeout: time.Second, PoolSize: 2}, "empty", "faults")
	patient := newTestHost(t, Config{CallTimeout: time.Minute, PoolSize: 2}, "empty", "faults")
	roomy := newTestHost(t, Config{CallTimeout: time.Minute, MaxMemoryBytes: 192 << 20, MaxOutputBytes: 64 << 20, PoolSize: 2}, "empty", "faults")
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
			_, err := faults.Canonicalize(context.Background(), []byte(`{"backend":"faults","mode":"`+tt.mode+`"}`))
			close(stop)
			served.Wait()
			if otherErr != nil {
				t.Fatalf("empty plugin failed during fault: %v", otherErr)
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v; want %v containing %q", err, tt.kind, tt.text)
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

// TestTrustedPlugins runs the faults plugin compiled without termination
// checks (Config.TrustBuiltins): failures are still precise, and a call past
// the timeout fails at once while its instance keeps its slot until the wasm
// returns on its own (a finite spin here; an endless loop would keep it).
func TestTrustedPlugins(t *testing.T) {
	ctx := context.Background()
	load := func(timeout time.Duration) *Plugin {
		h, err := NewHost(ctx, Config{CacheDir: testCacheDir(t), TrustBuiltins: true, CallTimeout: timeout,
			PoolSize: 1, AcquireTimeout: 2 * time.Minute, MaxMemoryBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(ctx) })
		p, err := h.LoadTrusted(ctx, "faults.wasm", readTestdata(t, "faults"))
		if err != nil {
			t.Fatal(err)
		}
		if !p.trusted {
			t.Fatal("not compiled as trusted")
		}
		return p
	}
	p := load(time.Minute)
	for _, tt := range []struct {
		mode string
		kind error
	}{{"error", ErrPlugin}, {"trap", ErrTrap}, {"grow", ErrMemory}, {"big", ErrMemory}} {
		if _, err := p.Canonicalize(ctx, []byte(`{"mode":"`+tt.mode+`"}`)); !errors.Is(err, tt.kind) {
			t.Errorf("%s: %v; want %v", tt.mode, err, tt.kind)
		}
	}
	p = load(50 * time.Millisecond)
	start := time.Now()
	_, err := p.Canonicalize(ctx, []byte(`{"mode":"spin"}`))
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("spin: %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("timeout returned after %s", time.Since(start))
	}
	// The only slot is held by the spinning call; the next call waits for it
	// to end, then runs on a new instance.
	res, err := p.Canonicalize(ctx, []byte(`{"mode":"ok"}`))
	if err != nil || res.DisplayName != "ok" {
		t.Fatalf("after spin: %v %+v", err, res)
	}
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
