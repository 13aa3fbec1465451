package main

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestServeAnswersProbesWhileStarting starts serve against a shared tier
// that accepts connections and never answers (a firewall that drops, an
// overloaded gateway), so that its start takes a minute: meanwhile its
// listener answers /healthz 200 "starting" (a liveness probe must not kill
// it) and /readyz and an entry's GET 503 "starting" with Retry-After,
// instead of leaving every probe to time out. Like every answer of the
// server, each carries X-Request-Id (the client's, when it is a sane one)
// and an error names it as request_id.
func TestServeAnswersProbesWhileStarting(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	_, addr, _ := startStuck(t)
	entry := "/v1/default/entries/" + strings.Repeat("ab", 32)
	tests := []struct {
		path       string
		sentID     string // X-Request-Id sent; "" for none
		status     int
		retryAfter bool
		taken      bool // the answer's id is the one sent
	}{
		{"/healthz", "", http.StatusOK, false, false},
		{"/healthz", "probe-1", http.StatusOK, false, true},
		{"/readyz", "", http.StatusServiceUnavailable, true, false},
		{entry, "job-7:step.3", http.StatusServiceUnavailable, true, true},
		{entry, "a b<script>", http.StatusServiceUnavailable, true, false},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.sentID != "" {
			req.Header.Set("X-Request-Id", tt.sentID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s while starting: %v", tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), `"starting"`) || (resp.Header.Get("Retry-After") != "") != tt.retryAfter {
			t.Errorf("GET %s while starting: %d %s (Retry-After %q), want %d saying starting", tt.path, resp.StatusCode, body, resp.Header.Get("Retry-After"), tt.status)
		}
		id := resp.Header.Get("X-Request-Id")
		switch {
		case tt.taken && id != tt.sentID:
			t.Errorf("GET %s while starting with X-Request-Id %q: answered with X-Request-Id %q, want the one sent", tt.path, tt.sentID, id)
		case !tt.taken && (id == "" || id == tt.sentID || seen[id]):
			t.Errorf("GET %s while starting (X-Request-Id %q sent): answered with X-Request-Id %q, want a new one the server made", tt.path, tt.sentID, id)
		}
		seen[id] = true
		if tt.status != http.StatusOK {
			var e struct {
				Error struct {
					RequestID string `json:"request_id"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &e) != nil || e.Error.RequestID != id {
				t.Errorf("GET %s while starting: error body %s does not name the request id %q", tt.path, body, id)
			}
		}
	}
}

// TestStartingHandOverDropsNothing hands a listener from the starting
// responder to the server that follows it while clients hammer it: every
// request gets an answer, 503 starting before and 200 after, none a
// connection closed unanswered (net/http's Shutdown drops a request read
// while it runs) or refused.
func TestStartingHandOverDropsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := answerWhileStarting(ln, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if r == nil {
		t.Fatal("no responder on a TCP listener")
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		failures []error
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: w%2 == 0}}
			for !stop.Load() {
				resp, err := client.Get("http://" + ln.Addr().String() + "/readyz")
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					statuses[resp.StatusCode]++
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Unlock()
			}
		}()
	}
	count := func(status int) int { mu.Lock(); defer mu.Unlock(); return statuses[status] }
	for count(http.StatusServiceUnavailable) < 200 {
		time.Sleep(5 * time.Millisecond)
	}
	r.stop()
	next := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
	go next.Serve(ln)
	defer next.Close()
	for count(http.StatusOK) < 200 {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the hand-over, e.g. %v", len(failures), len(failures)+count(200)+count(503), failures[0])
	}
}

// TestServeFailureIsLogged starts serve on a port that is taken, with JSON
// logs: it exits 1, and the reason is in a JSON line at level ERROR as
// well as in the plain "cachesvc serve:" line, so that a log shipper
// parsing JSON sees why the process ended.
func TestServeFailureIsLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd := exec.Command(buildBinary(t), "serve", "--addr", taken.Addr().String(), "--data", filepath.Join(t.TempDir(), "data"),
		"--log-format", "json", "--wasm-cache", testWasmCache(t))
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("serve on a taken port: exit %d, want 1:\n%s", code, out)
	}
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		var rec struct{ Level, Msg, Err string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" && rec.Msg == "serve failed" && strings.Contains(rec.Err, "listen on") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON line at ERROR says why serve ended:\n%s", out)
	}
}

// startStuck starts serve against a shared tier that accepts connections
// and never answers, so that serve stays in its start for a minute. It
// returns the process, the address it answers on while starting (from its
// log) and all it logs, which keeps coming.
func startStuck(t *testing.T) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hole.Close() })
	go func() {
		var held []net.Conn // answered never, closed with the test
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	cmd := exec.Command(buildBinary(t), "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"),
		"--log-format", "json", "--log-level", "info", "--wasm-cache", testWasmCache(t),
		"--s3-endpoint", "http://"+hole.Addr().String(), "--s3-bucket", "cache")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr string
	logs := &syncBuffer{}
	sc := bufio.NewScanner(stderr)
	for addr == "" && sc.Scan() {
		logs.Write(append(sc.Bytes(), '\n'))
		var line struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "starting:") {
			addr = line.Addr
		}
	}
	if addr == "" {
		t.Fatalf("serve never said it answers while starting (%v):\n%s", sc.Err(), logs.String())
	}
	go io.Copy(logs, stderr) // keep the pipe flowing
	return cmd, addr, logs
}

// TestServeStoppedWhileStarting sends SIGTERM to serve in the middle of
// its start: it ends at once, and logs that as a stop at info, not as
// "serve failed" at ERROR, which would page someone for a deploy. (The
// exit status, which names the signal, is main's business.)
func TestServeStoppedWhileStarting(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	cmd, _, logs := startStuck(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if st := cmd.ProcessState; st == nil || !st.Exited() {
		t.Fatalf("serve did not exit on its own after SIGTERM while starting: %v", st)
	}
	if l := logs.String(); strings.Contains(l, `"serve failed"`) || !strings.Contains(l, "stopped while starting") {
		t.Errorf("serve stopped while starting logs it as a failure, or not at all:\n%s", l)
	}
}
