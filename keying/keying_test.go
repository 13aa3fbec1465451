package keying

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

var testPlugins = []string{"empty", "faults", "nondet"}

// newTestKeyer returns a Keyer over the built-ins and the test plugins.
func newTestKeyer(t testing.TB, hcfg plugins.Config, cfg Config) *Keyer {
	t.Helper()
	return newKeyerWith(t, testPlugins, hcfg, cfg)
}

// newKeyerWith returns a Keyer over the built-ins and the named test
// plugins (plugins/testdata/<name>.wasm).
func newKeyerWith(t testing.TB, names []string, hcfg plugins.Config, cfg Config) *Keyer {
	t.Helper()
	ctx := context.Background()
	var files []string
	for _, n := range names {
		files = append(files, filepath.Join("..", "plugins", "testdata", n+".wasm"))
	}
	hcfg.CacheDir = pluginstest.CacheDir(t, files...)
	h, err := plugins.NewHost(ctx, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if err := h.LoadBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Load(ctx, f, b); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Host = h
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestComputeKeyGolden(t *testing.T) {
	// sha256("passthrough@1.0.0\x00passthrough\x00jax\x00jit_f-0a1b"): changing
	// this changes every stored key.
	got := ComputeKey("passthrough@1.0.0", "passthrough", []byte("jax\x00jit_f-0a1b")).String()
	if got != goldenKey {
		t.Fatalf("ComputeKey = %s; want %s", got, goldenKey)
	}
}

// goldenKey is the key of {"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}.
const goldenKey = "d82efbebde5a7310f1d9d8db3378baa471031c035d8c045e6227c8e85d96adc8"

func TestKey(t *testing.T) {
	k := newTestKeyer(t, plugins.Config{CallTimeout: 2 * time.Second}, Config{MaxSignatureBytes: 1 << 20})
	ctx := context.Background()
	tests := []struct {
		name    string
		sig     string
		kind    error
		text    string
		key     string // expected key when kind is nil
		display string
	}{
		{name: "passthrough", sig: `{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`, key: goldenKey, display: "jit_f-0a1b"},
		{name: "field order and spacing", sig: "{ \"key\": \"jit_f-0a1b\",\r\n \"kind\":\"jax\", \"backend\":\"passthrough\" }", key: goldenKey, display: "jit_f-0a1b"},
		{name: "not JSON", sig: `{"backend":`, kind: ErrMalformed, text: "not valid JSON"},
		{name: "malformed past the backend", sig: `{"backend":"passthrough","kind":"jax","key":"k","x":tru}`, kind: ErrMalformed, text: "not valid JSON"},
		{name: "array", sig: `[1]`, kind: ErrMalformed, text: "JSON object"},
		{name: "no backend", sig: `{"kind":"jax"}`, kind: ErrMalformed, text: `no "backend" field`},
		{name: "numeric backend", sig: `{"backend":7}`, kind: ErrMalformed, text: "non-empty string"},
		{name: "empty backend", sig: `{"backend":""}`, kind: ErrMalformed, text: "non-empty string"},
		{name: "unknown backend", sig: `{"backend":"cobol"}`, kind: ErrUnknownBackend, text: `"cobol"; known backends: empty, faults, nondet, passthrough`},
		{name: "plugin error", sig: `{"backend":"passthrough","kind":"jax"}`, kind: ErrPluginError, text: "plugin passthrough@1.0.0 rejected the signature: field key is required"},
		{name: "plugin timeout", sig: `{"backend":"faults","mode":"loop"}`, kind: ErrPluginFailed, text: "did not finish within 2s"},
		{name: "plugin trap", sig: `{"backend":"faults","mode":"trap"}`, kind: ErrPluginFailed, text: "deliberate panic"},
		{name: "too large", sig: `{"backend":"empty","x":"` + strings.Repeat("x", 1<<20) + `"}`, kind: ErrTooLarge, text: "exceeds the limit of 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := k.Key(ctx, []byte(tt.sig))
			if tt.kind != nil {
				var ke *Error
				if !errors.Is(err, tt.kind) || !errors.As(err, &ke) || !strings.Contains(err.Error(), tt.text) {
					t.Fatalf("err = %v; want %v containing %q", err, tt.kind, tt.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Key.String() != tt.key || res.DisplayName != tt.display || res.Plugin != "passthrough@1.0.0" || res.Backend != "passthrough" {
				t.Fatalf("result %+v (key %s)", res, res.Key)
			}
		})
	}
	var pe *plugins.Error
	if _, err := k.Key(ctx, []byte(`{"backend":"faults","mode":"trap"}`)); !errors.As(err, &pe) || !errors.Is(err, plugins.ErrTrap) {
		t.Fatalf("cause not kept: %v", err)
	}
}

func TestMemoAndRecall(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	k := newTestKeyer(t, plugins.Config{}, Config{RecallTTL: time.Hour, Now: clock, KeepCanonical: true})
	ctx := context.Background()
	sig := []byte(`{"backend":"nondet","x":1}`)
	first, err := k.Key(ctx, sig)
	if err != nil || first.Memo || string(first.Canonical) != string(sig)+"1" {
		t.Fatalf("first: %+v %v", first, err)
	}
	// The nondet plugin would answer differently; the memo answers instead.
	second, err := k.Key(ctx, sig)
	if err != nil || !second.Memo || second.Key != first.Key || second.Canonical != nil {
		t.Fatalf("second: %+v %v", second, err)
	}
	if _, ok := k.Recall(first.Key); !ok {
		t.Fatal("Recall missed a fresh key")
	}
	if _, ok := k.Recall(cachekey.Key{}); ok {
		t.Fatal("Recall hit an unknown key")
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if _, ok := k.Recall(first.Key); ok {
		t.Fatal("Recall hit an expired key")
	}
}

func TestSingleflight(t *testing.T) {
	k := newTestKeyer(t, plugins.Config{PoolSize: 2}, Config{})
	sig := []byte(`{"backend":"nondet","y":2}`)
	var wg sync.WaitGroup
	keys := make([]cachekey.Key, 32)
	errs := make([]error, 32)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := k.Key(context.Background(), sig)
			keys[i], errs[i] = r.Key, err
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Fatalf("caller %d: %v %s != %s", i, errs[i], keys[i], keys[0])
		}
	}
}

func TestCallerCancelDoesNotPoisonFlight(t *testing.T) {
	k := newTestKeyer(t, plugins.Config{}, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.Key(ctx, []byte(`{"backend":"empty","z":3}`)); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := k.Key(context.Background(), []byte(`{"backend":"empty","z":3}`)); err != nil {
		t.Fatal(err)
	}
}

func TestLRUBytes(t *testing.T) {
	l := newLRU[int, string](100)
	l.maxBytes, l.sizeOf = 10, func(s string) int64 { return int64(len(s)) }
	l.put(1, "aaaa")
	l.put(2, "bbbb")
	l.put(3, "cccc") // 12 bytes > 10: evicts 1
	if _, ok := l.get(1); ok || l.len() != 2 || l.bytes != 8 {
		t.Fatalf("len %d bytes %d", l.len(), l.bytes)
	}
	l.put(2, "b") // resize in place
	if l.bytes != 5 {
		t.Fatalf("bytes %d", l.bytes)
	}
}

func TestLRU(t *testing.T) {
	l := newLRU[int, string](2)
	l.put(1, "a")
	l.put(2, "b")
	l.get(1)
	l.put(3, "c") // evicts 2, the least recently used
	if _, ok := l.get(2); ok {
		t.Fatal("2 not evicted")
	}
	if v, ok := l.get(1); !ok || v != "a" || l.len() != 2 {
		t.Fatal("1 lost")
	}
	l.remove(1)
	if l.len() != 1 {
		t.Fatal("remove")
	}
}
