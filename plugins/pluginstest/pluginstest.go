// Package pluginstest helps tests that load wasm plugins start quickly.
//
// wazero compiles a Go plugin (2–4 MB of wasm) in seconds, but in a test
// binary built with -race its compiler runs tens of times slower. CacheDir
// returns a compilation cache directory shared by every test process of this
// user (keyed by module digest, wazero version and CPU, so sharing is safe)
// and, under -race, fills it by running plugins/internal/precompile without
// the race detector. Pass it as plugins.Config.CacheDir.
package pluginstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	once    sync.Once
	onceErr error
	dir     string
)

// CacheDir returns the shared compilation cache directory, precompiling the
// built-in plugins and extra (paths of .wasm files) when the test binary was
// built with -race. The environment variable CACHESVC_WASM_TEST_CACHE
// overrides the directory. Failures to precompile are logged, not fatal: the
// test then compiles in process, only slower.
func CacheDir(tb testing.TB, extra ...string) string {
	tb.Helper()
	once.Do(func() {
		dir = os.Getenv("CACHESVC_WASM_TEST_CACHE")
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "cachesvc-wasm-test-cache-"+strconv.Itoa(os.Getuid()))
		}
		onceErr = os.MkdirAll(dir, 0o755)
	})
	if onceErr != nil {
		tb.Logf("pluginstest: %v; compiling without a cache", onceErr)
		return ""
	}
	if raceEnabled {
		precompile(tb, extra)
	}
	return dir
}

func precompile(tb testing.TB, extra []string) {
	// wazero names its cache files after its own version, read from build
	// info; a test binary has none ("dev"), so stamp the same into precompile.
	args := []string{"run", "-ldflags=-X=github.com/tetratelabs/wazero/internal/version.version=" + wazeroVersion(),
		"github.com/cachesvc/cachesvc/plugins/internal/precompile", "-cache", dir}
	for _, e := range extra {
		abs, err := filepath.Abs(e)
		if err != nil {
			tb.Logf("pluginstest: %v", err)
			continue
		}
		args = append(args, abs)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Logf("pluginstest: precompile failed (%v): %s", err, out)
	}
}

// wazeroVersion mirrors wazero's internal/version.GetWazeroVersion.
func wazeroVersion() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
				v = dep.Version
			}
		}
		if v == "" || v == "(devel)" {
			v = info.Main.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}
