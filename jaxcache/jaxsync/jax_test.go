package jaxsync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
	"github.com/cachesvc/cachesvc/jaxcache/jaxsync"
)

// python returns the interpreter with JAX installed: $CACHESVC_PYTHON, or
// the repository's .venv (created by scripts/test.sh). The test is skipped
// without one unless CI is set.
func python(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CACHESVC_PYTHON")
	if p == "" {
		_, file, _, _ := runtime.Caller(0)
		p = filepath.Join(filepath.Dir(file), "..", "..", ".venv", "bin", "python")
	}
	if err := exec.Command(p, "-c", "import jax").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("JAX is not importable with %s (scripts/test.sh installs it): %v", p, err)
		}
		t.Skipf("JAX is not importable with %s: %v", p, err)
	}
	return p
}

type programReport struct {
	BackendCompiles int       `json:"backend_compiles"`
	CacheHits       int       `json:"cache_hits"`
	Results         []float64 `json:"results"`
}

func runProgram(t *testing.T, py, dir string, env []string) programReport {
	t.Helper()
	cmd := exec.Command(py, filepath.Join("testdata", "jax_program.py"), dir)
	cmd.Env = append(append(os.Environ(), "JAX_PLATFORMS=cpu"), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jax program: %v\n%s", err, out)
	}
	var r programReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("jax program output %q: %v", out, err)
	}
	return r
}

// TestStockJAXRoundTrip: process A runs stock JAX on dirA while the agent
// uploads; warm fills an empty dirB from A's run; process B on dirB makes
// zero backend compiles and computes the same results.
//
// JAX 0.10.2 puts "<cache dir>/xla_gpu_per_fusion_autotune_cache_dir" into
// the compile options it hashes (jax_persistent_cache_enable_xla_caches
// defaults to that flag, even on CPU), so its keys depend on the cache
// directory's path. Hosts of a sweep that share the path (the usual setup)
// share keys; otherwise set jax_persistent_cache_enable_xla_caches=none on
// both sides. The test covers both.
func TestStockJAXRoundTrip(t *testing.T) {
	py := python(t)
	srv := startServer(t)
	tests := []struct {
		name     string
		samePath bool
		env      []string
	}{
		{"same path on another host", true, nil},
		{"other path with xla caches off", false, []string{"JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := fmt.Sprintf("sweep%d.arm-a", i)
			base := t.TempDir()
			dirA, err := jaxcache.Open(filepath.Join(base, "dirA"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			up, _ := client.New(client.Config{BaseURL: srv.URL, Run: run})
			agent, err := jaxsync.NewAgent(jaxsync.AgentConfig{Client: up, Namespace: "default", Dir: dirA, Interval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			agentDone := make(chan error, 1)
			go func() { agentDone <- agent.Run(ctx) }()

			a := runProgram(t, py, dirA.Path(), tt.env)
			if a.BackendCompiles == 0 {
				t.Fatalf("process A compiled nothing: %+v", a)
			}
			files, _ := dirA.Scan()
			deadline := time.Now().Add(60 * time.Second)
			for {
				m, err := up.Manifest(ctx, "default", run)
				if err == nil && len(m.Keys) == len(files) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("agent uploaded %d of %d files in 60s (%v)", len(m.Keys), len(files), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			<-agentDone

			pathB := filepath.Join(base, "dirB")
			if tt.samePath { // another host: same configured path, empty
				if err := os.RemoveAll(dirA.Path()); err != nil {
					t.Fatal(err)
				}
				pathB = dirA.Path()
			}
			dirB, err := jaxcache.Open(pathB)
			if err != nil {
				t.Fatal(err)
			}
			rd, _ := client.New(client.Config{BaseURL: srv.URL})
			m, err := rd.Manifest(context.Background(), "default", run)
			if err != nil {
				t.Fatal(err)
			}
			res, err := jaxsync.Warm(context.Background(), jaxsync.WarmConfig{Client: rd, Namespace: "default", Dir: dirB, Entries: jaxsync.FromManifest(m)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Written != len(files) || res.Missing+res.Unnamed != 0 {
				t.Fatalf("warm: %+v, want %d written", res, len(files))
			}
			b := runProgram(t, py, dirB.Path(), tt.env)
			t.Logf("process A: %d backend compiles, %d files uploaded by the agent; %s; process B: %d backend compiles, %d persistent-cache hits",
				a.BackendCompiles, len(files), res, b.BackendCompiles, b.CacheHits)
			if b.BackendCompiles != 0 {
				t.Errorf("process B made %d backend compiles on the warmed dir, want 0", b.BackendCompiles)
			}
			for i := range a.Results {
				if a.Results[i] != b.Results[i] {
					t.Errorf("result %d: A %v, B %v", i, a.Results[i], b.Results[i])
				}
			}
		})
	}
}
