package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/store"
)

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingRE = regexp.MustCompile(`serving on (https?://\S+)`)

// waitURL polls out for the "serving on URL" line.
func waitURL(t *testing.T, out *syncBuffer, exited <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // a cold plugin compile under -race is slow
	for time.Now().Before(deadline) {
		if m := servingRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited with %d before serving", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not print its URL; stdout %q", out.String())
	return ""
}

// TestServeFromEnv runs `cachesvc serve` in-process with every setting from
// the environment, uploads and downloads an entry, and shuts down on
// context cancellation (what SIGTERM does).
func TestServeFromEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	t.Setenv("CACHESVC_ADDR", "127.0.0.1:0")
	t.Setenv("CACHESVC_DATA", dir)
	t.Setenv("CACHESVC_MAX_SIZE", "10MiB")
	t.Setenv("CACHESVC_MAX_ENTRY_SIZE", "1MiB")
	t.Setenv("CACHESVC_LOG_FORMAT", "json")
	t.Setenv("CACHESVC_SHUTDOWN_GRACE", "5s")
	t.Setenv("CACHESVC_WASM_CACHE", testWasmCache(t))
	t.Setenv("CACHESVC_QUARANTINE_AFTER", "1")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"serve"}, strings.NewReader(""), &stdout, &stderr) }()
	url := waitURL(t, &stdout, exited)
	if !strings.Contains(stdout.String(), "dashboard "+url+"/") {
		t.Errorf("stdout does not name the dashboard URL: %q", stdout.String())
	}

	body := bytes.Repeat([]byte("executable"), 1000)
	sum := sha256.Sum256(body)
	key := hex.EncodeToString(sum[:])
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/default/entries/"+key, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d", resp.StatusCode)
	}
	// --quarantine-after from the environment: one report quarantines.
	resp, err = http.Post(url+"/v1/default/entries/"+key+"/reports", "application/json",
		strings.NewReader(`{"reason":"cannot load","client":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(rep), `"threshold":1,"quarantined":true`) {
		t.Errorf("report = %d %s, want quarantined at threshold 1", resp.StatusCode, rep)
	}
	req, _ = http.NewRequest(http.MethodPost, url+"/v1/default/entries/"+key+"/restore", nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("restore = %d", resp.StatusCode)
	}
	// --max-entry-size from the environment: 413.
	req, _ = http.NewRequest(http.MethodPut, url+"/v1/default/entries/"+strings.Repeat("a", 64), bytes.NewReader(make([]byte, 2<<20)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized PUT = %d, want 413", resp.StatusCode)
	}
	resp, err = http.Get(url + "/v1/default/entries/" + key)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("GET returned %d bytes", len(got))
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("cachesvc_store_max_bytes 1.048576e+07")) {
		t.Errorf("metrics lack the 10 MiB store limit")
	}

	cancel()
	stopStart := time.Now()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("serve exited %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(5 * time.Minute):
		// Generous: closing waits for a built-in plugin compile still running
		// in the background, which is slow under -race on a cold cache.
		t.Fatal("serve did not stop after cancellation")
	}
	t.Logf("serve stopped %s after cancellation", time.Since(stopStart).Round(time.Millisecond))

	// Logs are JSON lines and name the namespace and key of entry requests.
	var sawKey bool
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["key"] == key && rec["namespace"] == "default" {
			sawKey = true
		}
	}
	if !sawKey {
		t.Errorf("no log line names the key and namespace:\n%s", stderr.String())
	}

	// The store was closed: it opens again and holds the entry.
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer st.Close()
	k, _ := cachekey.ParseKey(key)
	if m, err := st.Stat(context.Background(), "default", k); err != nil || m.Size != int64(len(body)) {
		t.Errorf("Stat after restart = %+v, %v", m, err)
	}
}

// TestServeBadFlags: a bad serve flag is a usage error (exit 2) that names
// the flag, before anything listens or opens.
func TestServeBadFlags(t *testing.T) {
	// A flag wrongly accepted gets serve past its checks: then it listens
	// on a free port (never the default 8080), keeps its store in a
	// temporary directory and, its context already ended, stops at once
	// with exit 0 or 1 rather than serving on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	started := []string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data")}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--log-format", "xml"}, "--log-format"},
		{[]string{"serve", "--log-level", "loud"}, "--log-level"},
		{[]string{"serve", "--max-size", "big"}, "max-size"},
		{[]string{"serve", "--quarantine-after", "0"}, "--quarantine-after"},
		{[]string{"serve", "--quarantine-after", "65"}, "--quarantine-after"},
		// 1ns ran a pass back to back with the last: a core spun forever.
		{append(started, "--expiry-interval", "1ns"), "--expiry-interval 1ns is too short: use 0 (off) or at least 100ms"},
		{append(started, "--expiry-interval", "50ms"), "--expiry-interval 50ms is too short"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--data", ""}, "--data is empty: give the store's directory"},
		{append(started, "--shutdown-grace", "-1s"), `invalid value "-1s" for --shutdown-grace: want 0 (abort in-flight requests at once) or more`},
		// plugins.Config and api.Limits read 0 or less as their default, so
		// these would quietly run with 10s and 30s.
		{append(started, "--plugin-timeout", "0"), `invalid value "0" for --plugin-timeout: want a positive duration`},
		// plugins.Config reads a pool of 0 or less as its default: -3 quietly meant min(CPUs, 4).
		{append(started, "--plugin-pool", "-3"), `invalid value "-3" for --plugin-pool: not understood: use a non-negative integer`},
		// It was quietly cut to 1024.
		{append(started, "--plugin-pool", "1025"), `invalid value "1025" for --plugin-pool: want 0 (min(CPUs, 4)) to 1024 live instances per plugin`},
		{[]string{"key", "--plugin-pool", "5000", "sig.json"}, `invalid value "5000" for --plugin-pool: want 0 (min(CPUs, 4)) to 1024`},
		// Every connection holds a buffer this large: 64GiB was "fatal
		// error: runtime: out of memory" on the first request, and 0 quietly
		// meant 16KiB.
		{append(started, "--max-header-size", "64GiB"), "--max-header-size 64GiB is out of range: use 1KiB to 1MiB"},
		{append(started, "--max-header-size", "0"), "--max-header-size 0 is out of range"},
		{append(started, "--min-transfer-rate", "0"), "--min-transfer-rate 0: want a positive rate"},
		{append(started, "--max-header-size", "100"), "--max-header-size 100 is out of range"},
		{append(started, "--read-timeout", "0"), `invalid value "0" for --read-timeout: want a positive duration`},
		{append(started, "--read-timeout", "-1s"), `invalid value "-1s" for --read-timeout: want a positive duration`},
		{append(started, "--write-timeout", "-1s"), `invalid value "-1s" for --write-timeout: want a positive duration`},
		// Refused whether or not --redis-addr is given, as it is parsed.
		{append(started, "--redis-idle-timeout", "-1s"), `invalid value "-1s" for --redis-idle-timeout: want 0 (never close an idle connection) or more`},
		// A negative bound answered every upload 503 upload_queue_full
		// ("0 entries queued"); 0 quietly meant the default.
		{append(started, "--s3-endpoint", "http://127.0.0.1:1", "--s3-bucket", "cache", "--write-mode", "behind", "--upload-queue-entries", "-5"),
			"--upload-queue-entries -5: want at least 1 (default 10000)"},
		{append(started, "--upload-queue-entries", "0"), "--upload-queue-entries 0: want at least 1"},
		{append(started, "--upload-queue-size", "0"), "--upload-queue-size 0: want at least 1 byte"},
		// The client refused it before sending; serve ran degraded for good.
		{append(started, "--s3-endpoint", "http://127.0.0.1:1", "--s3-bucket", "b"), `--s3-bucket "b" is not a bucket name: bucket name cannot be shorter than 3 characters`},
		{append(started, "--s3-endpoint", "http://127.0.0.1:1", "--s3-bucket", "s3://cache"), `--s3-bucket "s3://cache" is not a bucket name`},
		// It served with every upload stored directly, nothing queued.
		{append(started, "--write-mode", "behind"), "--write-mode behind needs a shared tier: give --s3-endpoint"},
		// "--addr 8080" was refused as a non-loopback address without
		// authentication; a missing or bad port failed at listen, exit 1.
		{[]string{"serve", "--addr", "8080", "--data", filepath.Join(t.TempDir(), "data")}, `--addr "8080" is not host:port: want host:port, e.g. 127.0.0.1:8080`},
		{append(started, "--addr", "127.0.0.1"), `--addr "127.0.0.1" is not host:port`},
		{append(started, "--addr", "127.0.0.1:99999"), `--addr "127.0.0.1:99999": port 99999 is out of range 0 to 65535`},
		{append(started, "--addr", "127.0.0.1:web"), `--addr "127.0.0.1:web": port "web" is not a number`},
		// A partial TLS setup was exit 1, after the store was opened.
		{append(started, "--tls-cert", "cert.pem"), "--tls-cert needs --tls-key"},
		{append(started, "--tls-key", "key.pem"), "--tls-key needs --tls-cert"},
		{append(started, "--tls-client-ca", "ca.pem"), "--tls-client-ca needs --tls-cert and --tls-key"},
		// Each was read as its library's default, so a user's 0 quietly
		// meant 64 uploads, 512MiB, 64MiB or 1GiB; a negative rate or
		// burst quietly meant no limit or twice the rate.
		{append(started, "--max-concurrent-uploads", "0"), "--max-concurrent-uploads 0: want at least 1, or -1 for no bound"},
		{append(started, "--max-concurrent-uploads", "-5"), "--max-concurrent-uploads -5: want at least 1, or -1 for no bound"},
		{append(started, "--rate-limit", "-1"), "--rate-limit -1: want 0 (no limit) or a positive rate"},
		{append(started, "--rate-burst", "-1"), "--rate-burst -1: want 0 (twice --rate-limit) or more"},
		{append(started, "--ipv6-client-prefix", "0"), "--ipv6-client-prefix 0: want a prefix length from 1 to 128"},
		{append(started, "--ipv6-client-prefix", "129"), "--ipv6-client-prefix 129: want a prefix length from 1 to 128"},
		{append(started, "--plugin-memory", "0"), `invalid value "0" for --plugin-memory: want a positive size, e.g. 512MiB`},
		{append(started, "--max-signature-size", "0"), `invalid value "0" for --max-signature-size: want a positive size, e.g. 64MiB`},
		{append(started, "--redis-max-buffered", "0"), `invalid value "0" for --redis-max-buffered: want a positive size, e.g. 1GiB`},
		// It named no flag: "the buffer limit (1073741824 bytes) is smaller than ...".
		{append(started, "--redis-addr", "127.0.0.1:0", "--redis-max-value", "2GiB", "--max-entry-size", "4GiB"),
			"--redis-max-buffered 1.0 GiB cannot hold one SET of the largest value (--redis-max-value 2.0 GiB"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, tc.args, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestServeFlagValues: what serve makes of flag values whose meaning for
// the user (0 = off) differs from the library's, checked on the options
// serve runs with.
func TestServeFlagValues(t *testing.T) {
	tests := []struct {
		args       []string
		wantExpiry time.Duration // negative: the store runs no expiry pass
		wantMemo   int           // negative: keying keeps no memo
	}{
		{nil, store.DefaultExpiryInterval, keying.DefaultMemoEntries},
		{[]string{"--expiry-interval", "30s"}, 30 * time.Second, keying.DefaultMemoEntries},
		{[]string{"--expiry-interval", "0"}, -1, keying.DefaultMemoEntries},
		{[]string{"--expiry-interval", "-1s"}, -time.Second, keying.DefaultMemoEntries},
		{[]string{"--signature-memo-entries", "0"}, store.DefaultExpiryInterval, -1},
	}
	for _, tc := range tests {
		var stderr bytes.Buffer
		sio := stdio{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
		o, err := parseServeFlags(tc.args, sio)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if (o.ExpiryInterval < 0) != (tc.wantExpiry < 0) || (tc.wantExpiry >= 0 && o.ExpiryInterval != tc.wantExpiry) {
			t.Errorf("%q: expiry interval %s, want %s", tc.args, o.ExpiryInterval, tc.wantExpiry)
		}
		if o.Plugins.MemoEntries != tc.wantMemo {
			t.Errorf("%q: memo entries %d, want %d", tc.args, o.Plugins.MemoEntries, tc.wantMemo)
		}
	}
}

// TestLoggerDurations: both log formats write a duration as "30s", never as
// JSON's integer nanoseconds (the shutdown line's grace).
func TestLoggerDurations(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		logger, err := newLogger(&buf, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		logger.Info("shutting down", "grace", 30*time.Second)
		if out := buf.String(); !strings.Contains(out, "30s") || strings.Contains(out, "30000000000") {
			t.Errorf("%s: %s", format, out)
		}
	}
}
