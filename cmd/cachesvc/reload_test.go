package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReloadsPluginsOnSIGHUP runs a real `cachesvc serve --plugins
// DIR`, changes DIR and sends SIGHUP: a replaced plugin serves its new
// version, a removed one's backend gets 422, and a broken file leaves the
// plugins in force serving.
func TestServeReloadsPluginsOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	pdir := t.TempDir()
	v1, err := os.ReadFile(buildExample(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	// A second version of the example: its version string patched.
	if n := bytes.Count(v1, []byte("0.1.0")); n != 1 {
		t.Fatalf("the example's version occurs %d times in its wasm", n)
	}
	v2 := bytes.Replace(v1, []byte("0.1.0"), []byte("0.2.0"), 1)
	empty, err := os.ReadFile("../../plugins/testdata/empty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, b []byte) { writeAtomic(t, filepath.Join(pdir, name), b) }
	put("cmdline.wasm", v1)
	put("empty.wasm", empty)

	p := startServer(t, bin, filepath.Join(t.TempDir(), "data"), "--plugins", pdir, "--log-level", "info")
	sig, err := os.ReadFile("../../plugins/examples/cmdline/testdata/gcc.json")
	if err != nil {
		t.Fatal(err)
	}
	keys := func(body []byte) (int, map[string]any) { return postJSON(t, p.url+"/v1/default/keys", body) }
	status, r := keys(sig)
	if status != http.StatusOK || r["plugin"] != "cmdline@0.1.0" {
		t.Fatalf("keys before the reload: %d %v", status, r)
	}
	oldKey := r["key"]
	if status, r := keys([]byte(`{"backend":"empty"}`)); status != http.StatusOK || r["plugin"] != "empty@1" {
		t.Fatalf("empty before the reload: %d %v", status, r)
	}

	// Replace cmdline with 0.2.0 and remove empty.
	put("cmdline.wasm", v2)
	os.Remove(filepath.Join(pdir, "empty.wasm"))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := waitLog(t, p, `"plugins reloaded"`)
	if !containsAll(line, []string{"cmdline@0.1.0 -> cmdline@0.2.0 " + filepath.Join(pdir, "cmdline.wasm"), "empty@1 " + filepath.Join(pdir, "empty.wasm")}) {
		t.Errorf("reload log line: %s", line)
	}
	status, r = keys(sig)
	if status != http.StatusOK || r["plugin"] != "cmdline@0.2.0" || r["key"] == oldKey {
		t.Fatalf("keys after the reload: %d %v (key before %v)", status, r, oldKey)
	}
	newKey := r["key"]
	status, r = keys([]byte(`{"backend":"empty"}`))
	if e, _ := r["error"].(map[string]any); status != http.StatusUnprocessableEntity || e["code"] != "unknown_backend" {
		t.Fatalf("removed backend: %d %v", status, r)
	}

	// A broken file: the reload fails as a whole and 0.2.0 keeps serving.
	put("broken.wasm", []byte("not wasm"))
	put("empty.wasm", empty) // a good change in the same reload, not applied
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, `"plugin reload failed; keeping the current plugins"`, filepath.Join(pdir, "broken.wasm"))
	if status, r := keys(sig); status != http.StatusOK || r["plugin"] != "cmdline@0.2.0" || r["key"] != newKey {
		t.Fatalf("keys after a failed reload: %d %v", status, r)
	}
	if status, _ := keys([]byte(`{"backend":"empty"}`)); status != http.StatusUnprocessableEntity {
		t.Fatalf("a failed reload added empty: %d", status)
	}

	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`cachesvc_plugin_reloads_total{result="ok"} 1`, `cachesvc_plugin_reloads_total{result="failed"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	p.stop(t, 30*time.Second)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestServeSurvivesSIGHUPWithNothingToReload: a server with no tokens,
// namespaces or plugins file still handles SIGHUP (logrotate and config
// tools send it to every service), instead of dying of it with no graceful
// shutdown.
func TestServeSurvivesSIGHUPWithNothingToReload(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	p := startServer(t, bin, filepath.Join(t.TempDir(), "data"), "--log-level", "info")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP to be logged", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("cachesvc serve exited on SIGHUP:\n%s", p.stderr.String())
		default:
		}
		return strings.Contains(p.stderr.String(), "nothing to reload")
	})
	resp, err := http.Get(p.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after SIGHUP: %d", resp.StatusCode)
	}
	p.stop(t, time.Minute)
}

// TestServeSurvivesSIGHUPDuringStart sends SIGHUP while serve is still
// starting (its first log line is out, its store not yet open): it must
// not die of it (SIGHUP's default action, exit 129 with no word, as it did
// until the reload loop ran), but start, serve and answer the reload.
func TestServeSurvivesSIGHUPDuringStart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"),
		"--log-format", "json", "--log-level", "info", "--wasm-cache", testWasmCache(t))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout syncBuffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var logs syncBuffer
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() { // the first line: serve is past its flags, before its store
		t.Fatalf("serve wrote nothing to stderr: %v", sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.Write(append(sc.Bytes(), '\n'))
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
		}
		close(ended)
	}()
	waitFor(t, "serve to start and answer the SIGHUP", func() bool {
		select {
		case <-ended:
			_ = cmd.Wait()
			t.Fatalf("serve ended on a SIGHUP during its start (%v):\n%s", cmd.ProcessState, logs.String())
		default:
		}
		return strings.Contains(stdout.String(), "serving on") && strings.Contains(logs.String(), "nothing to reload")
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-ended
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
}

// TestAgentSurvivesSIGHUP: operators send SIGHUP to every service on a host
// to reload configuration; the agent, a daemon like serve, has nothing to
// reload (it reads its flags once) and must say so and keep running rather
// than die of SIGHUP's default action (exit 129, no word). A stop it is
// then asked for still ends it as before.
func TestAgentSurvivesSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	hang, _ := stalledServer(t, nil) // interrupt_test.go
	tests := []struct {
		name string
		args []string
		stop syscall.Signal
		want int // exit code after stop
	}{
		{"watching", []string{"agent", "--url", hang, "--interval", "10ms", "--jax-cache-dir", t.TempDir()}, syscall.SIGTERM, 0},
		{"--once between polls", []string{"agent", "--url", hang, "--once", "--interval", "1m", "--jax-cache-dir", t.TempDir()}, syscall.SIGINT, 130},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "CACHESVC_TOKEN=", "CACHESVC_URL=")
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			alive := func() {
				select {
				case <-exited:
					t.Fatalf("agent exited (%v) on SIGHUP; stderr:\n%s", cmd.ProcessState, stderr.String())
				default:
				}
			}
			waitFor(t, "the agent to watch", func() bool { alive(); return strings.Contains(stderr.String(), `msg="agent watching"`) })
			for i := range 2 { // every SIGHUP, not only the first
				if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the SIGHUP to be logged", func() bool {
					alive()
					return strings.Count(stderr.String(), "nothing to reload") == i+1
				})
			}
			if err := cmd.Process.Signal(tc.stop); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("no exit 30s after %s; stderr:\n%s", tc.stop, stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.want {
				t.Errorf("exit %d after %s, want %d; stderr:\n%s", code, tc.stop, tc.want, stderr.String())
			}
		})
	}
}
