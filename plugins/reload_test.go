package plugins

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// withCustomSection appends a custom section to wasm: other bytes, the same
// plugin (a "new build" of it with the same name@version).
func withCustomSection(wasm []byte, name string) []byte {
	c := binary.AppendUvarint(nil, uint64(len(name)))
	c = append(c, name...)
	c = append(c, "reload test"...) // a payload: wazero misreads an empty one
	out := append(bytes.Clone(wasm), 0)
	out = binary.AppendUvarint(out, uint64(len(c)))
	return append(out, c...)
}

var (
	exampleOnce sync.Once
	exampleDir  string
	exampleErr  error
)

// examplePlugins builds plugins/examples/cmdline once per test binary and
// returns it (cmdline@0.1.0) and a copy whose describe says 0.2.0 (the
// version string patched in its data section: two versions of one plugin
// without a second source tree).
func examplePlugins(t *testing.T) (v1, v2 []byte, paths []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the example plugin; skipped with -short")
	}
	exampleOnce.Do(func() {
		exampleDir, exampleErr = os.MkdirTemp("", "cachesvc-reload-test-")
		if exampleErr != nil {
			return
		}
		v1 := filepath.Join(exampleDir, "cmdline-0.1.0.wasm")
		cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", v1, "./examples/cmdline")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			exampleErr = errors.New("build example plugin: " + err.Error() + "\n" + string(out))
			return
		}
		b, err := os.ReadFile(v1)
		if err != nil {
			exampleErr = err
			return
		}
		if n := bytes.Count(b, []byte(`0.1.0`)); n != 1 {
			exampleErr = errors.New("the example's version string occurs " + string(rune('0'+n)) + " times; cannot patch it")
			return
		}
		exampleErr = os.WriteFile(filepath.Join(exampleDir, "cmdline-0.2.0.wasm"), bytes.Replace(b, []byte(`0.1.0`), []byte(`0.2.0`), 1), 0o644)
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	paths = []string{filepath.Join(exampleDir, "cmdline-0.1.0.wasm"), filepath.Join(exampleDir, "cmdline-0.2.0.wasm")}
	v1, _ = os.ReadFile(paths[0])
	v2, _ = os.ReadFile(paths[1])
	return v1, v2, paths
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exampleDir != "" {
		os.RemoveAll(exampleDir)
	}
	os.Exit(code)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(infos []Info) string {
	var s []string
	for _, i := range infos {
		s = append(s, i.ID)
	}
	return strings.Join(s, ",")
}

// checkRetired checks that p is closed and holds no instance.
func checkRetired(t *testing.T, p *Plugin) {
	t.Helper()
	if _, err := p.Canonicalize(context.Background(), []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("call on retired %s: %v; want ErrClosed", p.ID(), err)
	}
	if n := p.live.Load(); n != 0 {
		t.Errorf("retired %s still has %d live instances", p.ID(), n)
	}
}

func TestReloadDir(t *testing.T) {
	v1, v2, paths := examplePlugins(t)
	ctx := context.Background()
	pluginstest.CacheDir(t, paths...) // precompile the example under -race
	h := newTestHost(t, Config{}, "builtin")
	passthrough := mustPlugin(t, h, "passthrough")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "empty.wasm"), readTestdata(t, "empty"))
	if _, err := h.LoadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	empty := mustPlugin(t, h, "empty")
	sig := []byte(`{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-c","a.c"],"inputs":{"a.c":"sha256:aa"}}`)

	// Add: the unchanged file keeps its plugin.
	writeFile(t, filepath.Join(dir, "faults.wasm"), readTestdata(t, "faults"))
	writeFile(t, filepath.Join(dir, "cmdline.wasm"), v1)
	r, err := h.ReloadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if names(r.Added) != "cmdline@0.1.0,faults@1" || names(r.Unchanged) != "empty@1" || len(r.Replaced)+len(r.Removed) != 0 {
		t.Fatalf("add: %+v", r)
	}
	if mustPlugin(t, h, "empty") != empty {
		t.Fatal("an unchanged file got a new plugin")
	}
	old := mustPlugin(t, h, "cmdline")
	if _, err := old.Canonicalize(ctx, sig); err != nil {
		t.Fatal(err)
	}

	// Replace with another version.
	writeFile(t, filepath.Join(dir, "cmdline.wasm"), v2)
	if r, err = h.ReloadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if len(r.Replaced) != 1 || r.Replaced[0].Old.ID != "cmdline@0.1.0" || r.Replaced[0].New.ID != "cmdline@0.2.0" ||
		r.Replaced[0].SameVersion() || names(r.Unchanged) != "empty@1,faults@1" || len(r.Added)+len(r.Removed) != 0 {
		t.Fatalf("replace: %+v", r)
	}
	cur := mustPlugin(t, h, "cmdline")
	if cur.ID() != "cmdline@0.2.0" {
		t.Fatalf("cmdline is %s after the reload", cur.ID())
	}
	if _, err := cur.Canonicalize(ctx, sig); err != nil {
		t.Fatal(err)
	}
	checkRetired(t, old)

	// Rebuilt: other bytes under the same name@version. The new code
	// serves, and the report says the version stayed.
	writeFile(t, filepath.Join(dir, "cmdline.wasm"), withCustomSection(v2, "rebuild"))
	if r, err = h.ReloadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if len(r.Replaced) != 1 || !r.Replaced[0].SameVersion() || r.Replaced[0].New.ID != "cmdline@0.2.0" {
		t.Fatalf("rebuild: %+v", r)
	}
	if rebuilt := mustPlugin(t, h, "cmdline"); rebuilt == cur {
		t.Fatal("the rebuilt file did not replace its plugin")
	} else {
		checkRetired(t, cur)
		cur = rebuilt
	}

	// Remove.
	os.Remove(filepath.Join(dir, "empty.wasm"))
	if r, err = h.ReloadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if names(r.Removed) != "empty@1" || names(r.Unchanged) != "cmdline@0.2.0,faults@1" || len(r.Added)+len(r.Replaced) != 0 {
		t.Fatalf("remove: %+v", r)
	}
	if _, ok := h.ForBackend("empty"); ok {
		t.Fatal("a removed plugin still serves")
	}
	checkRetired(t, empty)

	// Nothing changed.
	if r, err = h.ReloadDir(ctx, dir); err != nil || r.Changed() || len(r.Unchanged) != 2 {
		t.Fatalf("no-op reload: %+v %v", r, err)
	}
	if mustPlugin(t, h, "cmdline") != cur || mustPlugin(t, h, "passthrough") != passthrough {
		t.Fatal("a no-op reload replaced a plugin")
	}
	if got := strings.Join(h.Backends(), ","); got != "cmdline,faults,passthrough,pt2,xla" {
		t.Fatalf("backends = %s", got)
	}
}

// TestReloadDirFailuresChangeNothing: every bad directory fails the whole
// reload with an error naming the file, and the plugins in force stay.
func TestReloadDirFailuresChangeNothing(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, Config{}, "builtin")
	if _, err := h.Load(ctx, "nondet.wasm", readTestdata(t, "nondet")); err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	writeFile(t, filepath.Join(good, "empty.wasm"), readTestdata(t, "empty"))
	if _, err := h.LoadDir(ctx, good); err != nil {
		t.Fatal(err)
	}
	before := h.Plugins()
	routes := map[string]*Plugin{}
	for _, b := range h.Backends() {
		routes[b], _ = h.ForBackend(b)
	}
	tests := []struct {
		name  string
		files map[string][]byte // nil value: a directory named so (unreadable as a file)
		bad   string            // the file the error must name
		kind  error
		text  string
	}{
		{"garbage", map[string][]byte{"x.wasm": []byte("not wasm")}, "x.wasm", ErrInvalid, "compile plugin"},
		{"missing export", map[string][]byte{"x.wasm": wasmNoExports()}, "x.wasm", ErrInvalid, `export "_initialize"`},
		{"unreadable", map[string][]byte{"x.wasm": nil}, "x.wasm", nil, "is a directory"},
		{"two files claim one name", map[string][]byte{"a.wasm": readTestdata(t, "empty"), "b.wasm": withCustomSection(readTestdata(t, "empty"), "b")},
			"b.wasm", ErrDuplicate, `name "empty" is taken by empty@1`},
		{"claims a built-in", map[string][]byte{"pt.wasm": mustBuiltin(t, "passthrough.wasm")}, "pt.wasm", ErrDuplicate, `name "passthrough" is taken`},
		{"claims a loaded plugin", map[string][]byte{"nd.wasm": readTestdata(t, "nondet")}, "nd.wasm", ErrDuplicate, `name "nondet" is taken`},
		{"missing dir", nil, "missing", nil, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// Beside the bad file, a good change that must not happen.
			writeFile(t, filepath.Join(dir, "faults.wasm"), readTestdata(t, "faults"))
			for name, b := range tt.files {
				if b == nil {
					os.Mkdir(filepath.Join(dir, name), 0o755)
					continue
				}
				writeFile(t, filepath.Join(dir, name), b)
			}
			want := filepath.Join(dir, tt.bad)
			if tt.files == nil {
				dir = filepath.Join(dir, "missing")
				want = dir
			}
			goroutines := runtime.NumGoroutine()
			r, err := h.ReloadDir(ctx, dir)
			if err == nil || (tt.kind != nil && !errors.Is(err, tt.kind)) ||
				!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v; want %v naming %s and containing %q", err, tt.kind, want, tt.text)
			}
			if r.Changed() || len(r.Unchanged) > 0 {
				t.Errorf("failed reload reported %+v", r)
			}
			if got := h.Plugins(); len(got) != len(before) {
				t.Fatalf("plugins after a failed reload: %v; before %v", got, before)
			}
			for b, p := range routes {
				if q, _ := h.ForBackend(b); q != p {
					t.Fatalf("backend %s rerouted by a failed reload", b)
				}
			}
			if _, ok := h.ForBackend("faults"); ok {
				t.Fatal("a failed reload added faults")
			}
			if _, err := routes["empty"].Canonicalize(ctx, []byte(`{}`)); err != nil {
				t.Fatalf("empty after a failed reload: %v", err)
			}
			waitGoroutines(t, goroutines)
		})
	}
}

// waitGoroutines waits until at most n goroutines run (the ones a failed
// or finished reload started have ended).
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReloadDirDrainsInFlight: a long call on a plugin that a reload
// replaces finishes normally while new calls reach the new plugin, and the
// old one is released afterwards.
func TestReloadDirDrainsInFlight(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, Config{CallTimeout: time.Minute, PoolSize: 2}, "builtin")
	dir := t.TempDir()
	faults := readTestdata(t, "faults")
	writeFile(t, filepath.Join(dir, "faults.wasm"), faults)
	if _, err := h.LoadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	old := mustPlugin(t, h, "faults")
	goroutines := runtime.NumGoroutine()

	spin := make(chan error, 1)
	go func() {
		_, err := old.Canonicalize(ctx, []byte(`{"mode":"spin"}`))
		spin <- err
	}()
	for old.inFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	writeFile(t, filepath.Join(dir, "faults.wasm"), withCustomSection(faults, "v2"))
	type result struct {
		r   ReloadReport
		err error
	}
	reloaded := make(chan result, 1)
	go func() {
		r, err := h.ReloadDir(ctx, dir)
		reloaded <- result{r, err}
	}()
	var cur *Plugin
	for cur = mustPlugin(t, h, "faults"); cur == old; cur = mustPlugin(t, h, "faults") {
		time.Sleep(time.Millisecond)
	}
	if old.inFlight() == 0 {
		t.Skip("the spin call finished before the swap; nothing to observe on this machine")
	}
	if res, err := cur.Canonicalize(ctx, []byte(`{"mode":"ok"}`)); err != nil || res.DisplayName != "ok" {
		t.Fatalf("new plugin during the drain: %v %v", res, err)
	}
	select {
	case res := <-reloaded:
		t.Fatalf("ReloadDir returned before the call it drains ended: %+v %v", res.r, res.err)
	default:
	}
	if err := <-spin; err != nil {
		t.Fatalf("in-flight call on the replaced plugin: %v", err)
	}
	res := <-reloaded
	if res.err != nil || len(res.r.Replaced) != 1 || res.r.Replaced[0].Old.ID != "faults@1" || res.r.Replaced[0].New.ID != "faults@1" {
		t.Fatalf("reload: %+v %v", res.r, res.err)
	}
	checkRetired(t, old)
	if started, _ := old.Stats(); started < 1 {
		t.Fatalf("old plugin started %d instances", started)
	}

	// Remove it for good: nothing of it is left running.
	os.Remove(filepath.Join(dir, "faults.wasm"))
	if r, err := h.ReloadDir(ctx, dir); err != nil || names(r.Removed) != "faults@1" {
		t.Fatalf("remove: %+v %v", r, err)
	}
	checkRetired(t, cur)
	waitGoroutines(t, goroutines)
}

// TestDrainStopsCallsPastTheWait: Drain does not wait forever for a call
// that does not end.
func TestDrainStopsCallsPastTheWait(t *testing.T) {
	h := newTestHost(t, Config{CallTimeout: time.Hour}, "faults")
	p := mustPlugin(t, h, "faults")
	done := make(chan error, 1)
	go func() {
		_, err := p.Canonicalize(context.Background(), []byte(`{"mode":"loop"}`))
		done <- err
	}()
	for p.inFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	p.Drain(context.Background(), 200*time.Millisecond)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v; want ErrClosed", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > time.Minute {
		t.Fatalf("Drain took %s", d)
	}
	checkRetired(t, p)
}
