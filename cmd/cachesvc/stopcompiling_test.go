package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStopWhileBuiltinsCompile stops `cachesvc serve` while its built-in
// plugins still compile (a cold --wasm-cache, one CPU), as a deploy that is
// rolled back at once or a test that starts and stops a server does. The
// stop must not wait for the compile: exit 0 within closeMargin, saying
// the compile was left. Before, the plugins' close step waited for the
// compile; on a loaded CI machine that took past --shutdown-grace +
// closeMargin, and serve exited 1 naming plugins, statistics and store as
// not closed (TestREADMEProxySnippet and TestRequestIDThroughProxy failed
// so in CI).
func TestStopWhileBuiltinsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	bin := buildBinary(t)
	t.Setenv("GOMAXPROCS", "1") // a slower compile, as on a loaded host
	p := startServer(t, bin, t.TempDir(), "--shutdown-grace", "0s", "--wasm-cache", t.TempDir(), "--log-level", "info")
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Skip("the built-in plugins compiled before the stop could be sent: nothing to test on this machine")
	}
	start := time.Now()
	code, stderr := p.terminate(t, closeMargin+10*time.Second) // slack for a loaded machine
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d, want 0: nothing was lost:\n%s", code, stderr)
	}
	stop := strings.Index(stderr, `"msg":"shutting down"`)
	if ready := strings.Index(stderr, `"msg":"built-in plugins ready"`); ready >= 0 && ready < stop {
		t.Skip("the built-in plugins compiled before the stop reached them: nothing to test on this machine")
	}
	if !strings.Contains(stderr, "built-in plugins still compiling at exit: not waited for") {
		t.Errorf("the stop waited for the compile (or did not say it left it):\n%s", stderr)
	}
}
