package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/redis/go-redis/v9"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/wire"
)

// lintAllowed lists the promlint problems that are deliberate, each as
// metric name and promlint's text, with the reason. Keep it empty unless
// a name is correct as it is; add only the exact problem.
var lintAllowed = map[[2]string]string{}

// TestMetricsLint runs a real `cachesvc serve` as a fleet replica (a
// tiered store on versitygw, write mode behind) with tokens, quotas, a rate
// limit, digest lookups and the Redis listener; drives every kind of
// traffic that creates series (uploads, hits and misses by entry, keys and
// lookups from signatures, a plugin rejection, batch, leases, reports and
// quarantine, stats and miss explanations, refused requests
// 401/403/400/404/429, a RESP SET, GET and protocol error, a SIGHUP reload,
// a 503 with the shared tier down); and lints the whole /metrics exposition
// with promlint: base units, counters ending in _total, snake_case, help on
// every family, no clash with the histogram and summary suffixes. Only
// cachesvc_plugin_reloads_total (needs --plugins) is left unexercised.
func TestMetricsLint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary with an S3 server")
	}
	f := newFleet(t)
	const (
		adminSecret  = "s3cr3t-ops-lint-1"
		viewerSecret = "s3cr3t-viewer-lint-1"
		hammerSecret = "s3cr3t-hammer-lint-1"
	)
	tokens := authtest.WriteTokens(t, []authtest.Token{
		{Name: "ops", Secret: adminSecret, Scopes: "*:admin"},
		{Name: "viewer", Secret: viewerSecret, Scopes: "default:read"},
		{Name: "hammer", Secret: hammerSecret, Scopes: "default:read"},
	}, "")
	nsFile := filepath.Join(t.TempDir(), "namespaces.json")
	writeAtomic(t, nsFile, []byte(`{"namespaces": {"default": {"max_bytes": "10MiB", "max_entries": 1000}}}`))
	p := f.replica(t, "--tokens", tokens, "--namespaces", nsFile, "--digest-lookups",
		"--rate-limit", "1", "--rate-burst", "300", "--write-mode", "behind",
		"--redis-addr", "127.0.0.1:0", "--redis-namespace", "torch")
	waitReadyz(t, p.url)

	do := func(secret, method, path, body string, want int, headers ...string) string {
		t.Helper()
		req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body = http.NoBody
		} else if method == http.MethodPost || method == http.MethodDelete {
			req.Header.Set("Content-Type", "application/json")
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if want != 0 && resp.StatusCode != want {
			t.Fatalf("%s %s = %d %.300s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	// getStatus GETs path with secret's token and returns the status,
	// whatever it is (for loops that wait for one).
	getStatus := func(secret, path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	hit, other, absent := storeKey("lint-hit"), storeKey("lint-other"), storeKey("lint-absent")
	entry := "/v1/default/entries/"

	// Entries: upload (created, exists, conflict), hit, miss, HEAD.
	do(adminSecret, "PUT", entry+hit, "executable", 201, wire.HeaderCompileSeconds, "12", wire.HeaderBackend, "xla",
		"X-Cachesvc-Name", "jit_step", "X-Cachesvc-Run", "lint-run")
	do(adminSecret, "PUT", entry+hit, "executable", 200)
	do(adminSecret, "PUT", entry+hit, "different", 409)
	do(adminSecret, "PUT", entry+other, "other bytes", 201, wire.HeaderBackend, "xla")
	do(adminSecret, "GET", entry+hit, "", 200)
	do(viewerSecret, "HEAD", entry+hit, "", 200)
	do(adminSecret, "GET", entry+absent, "", 404, wire.HeaderBackend, "xla", "X-Cachesvc-Name", "jit_missing")

	// Keys from signatures (a plugin call), lookups by signature and by
	// digest, batch and exists.
	sig := `{"backend":"passthrough","kind":"jax","key":"jit_f-lint"}`
	do(adminSecret, "POST", "/v1/default/keys", sig, 200)
	do(adminSecret, "POST", "/v1/default/keys", `{"backend":"passthrough","kind":"Bad!","key":"jit_f-lint"}`, 422)
	do(adminSecret, "POST", "/v1/default/lookup", sig, 404)
	do(adminSecret, "POST", "/v1/default/lookup", "", 0, wire.HeaderSignatureSHA256, storeKey(sig))
	do(adminSecret, "POST", "/v1/default/batch", `{"keys":["`+hit+`","`+absent+`"]}`, 200)
	do(adminSecret, "POST", "/v1/default/exists", `{"keys":["`+hit+`","`+absent+`"]}`, 200)

	// Leases and run manifests.
	do(adminSecret, "POST", "/v1/default/leases/"+absent, `{"holder":"h1:1","ttl_s":60}`, 201)
	do(adminSecret, "POST", "/v1/default/leases/"+absent, `{"holder":"h2:1","ttl_s":60}`, 409)
	do(adminSecret, "DELETE", "/v1/default/leases/"+absent+"?holder=h1:1", "", 204)
	do(adminSecret, "GET", "/v1/default/runs/lint-run/manifest", "", 200)

	// Reports until quarantine, an admin quarantine and a restore.
	do(viewerSecret, "POST", entry+other+"/reports", `{"reason":"deserialize failed","client":"c1"}`, 200)
	do(viewerSecret, "POST", entry+other+"/reports", `{"reason":"deserialize failed","client":"c2"}`, 200)
	do(viewerSecret, "POST", entry+absent+"/reports", `{"reason":"x"}`, 404)
	do(adminSecret, "POST", entry+hit+"/quarantine", `{"reason":"lint"}`, 0)
	do(adminSecret, "POST", entry+hit+"/restore", "", 0)

	// Stats and miss explanations.
	do(adminSecret, "GET", "/v1/stats", "", 200)
	do(adminSecret, "GET", "/v1/stats?scope=fleet", "", 200)
	do(viewerSecret, "GET", "/v1/default/stats", "", 200)
	do(viewerSecret, "GET", "/v1/default/misses", "", 200)
	do(adminSecret, "GET", "/v1/default/entries", "", 200)

	// Refused: unauthenticated, forbidden, bad input, unmatched, rate.
	do("", "GET", entry+hit, "", 401)
	do("wrong-secret", "GET", entry+hit, "", 401)
	do(viewerSecret, "PUT", entry+absent, "x", 403)
	do(adminSecret, "GET", entry+"not-a-key", "", 400)
	do(adminSecret, "GET", "/no/such/route", "", 404)
	for i := 0; ; i++ {
		if i > 400 {
			t.Fatal("300 requests of burst at 1/s and no 429")
		}
		if getStatus(hammerSecret, "/v1/default/stats") == http.StatusTooManyRequests {
			break
		}
	}

	// The Redis protocol: a SET and a GET of a torch entry.
	m := redisRE.FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("stdout does not name the redis listener: %q", p.stdout.String())
	}
	rc := redis.NewClient(&redis.Options{Addr: m[1], Password: adminSecret, MaxRetries: -1})
	defer rc.Close()
	ctx := context.Background()
	rkey := "pt2:fx-graph-v1::fq3v5xkz7w2yhb6c4n8dj0rtmg1lpae9souyi3k5x7b2c4d6e8:c1"
	if err := rc.Set(ctx, rkey, `{"data": "AAAA", "time_taken_ms": 4000}`, 0).Err(); err != nil {
		t.Fatalf("redis SET: %v", err)
	}
	if err := rc.Get(ctx, rkey).Err(); err != nil {
		t.Fatalf("redis GET: %v", err)
	}

	// A RESP protocol error.
	conn, err := net.Dial("tcp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte("*x\r\n"))
	io.Copy(io.Discard, conn)
	conn.Close()

	// A reload of the namespaces file.
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	metric := func(line string) bool {
		return strings.Contains(do(adminSecret, "GET", "/metrics", "", 200), line)
	}
	waitFor(t, "the SIGHUP reload to be counted", func() bool { return metric(`cachesvc_namespaces_reloads_total{result="ok"} 1`) })

	// The shared tier down: a cold read is a 503 and the tier counts errors.
	f.s3.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code := getStatus(adminSecret, entry+storeKey(fmt.Sprint("lint-cold-", time.Now().UnixNano())))
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a cold GET with S3 stopped is still %d after 30 s, want 503", code)
		}
		time.Sleep(100 * time.Millisecond)
	}

	exposition := do(adminSecret, "GET", "/metrics", "", 200)
	// The families the traffic above must have created: if one is missing
	// the lint below did not see it.
	for _, name := range []string{
		"cachesvc_http_requests_total", "cachesvc_http_request_duration_seconds", "cachesvc_puts_total",
		"cachesvc_lookups_by_route_total", "cachesvc_lookups_total", "cachesvc_compile_seconds_saved_total",
		"cachesvc_signature_digest_requests_total", "cachesvc_plugin_call_duration_seconds",
		"cachesvc_entry_reports_total", "cachesvc_auth_failures_total", "cachesvc_limited_total",
		"cachesvc_namespace_quota_bytes", "cachesvc_shared_tier_duration_seconds", "cachesvc_shared_tier_errors_total",
		"cachesvc_tier_gets_total", "cachesvc_tier_events_total", "cachesvc_plugin_failures_total",
		"cachesvc_resp_protocol_errors_total", "cachesvc_resp_commands_total", "cachesvc_namespaces_reloads_total",
		"cachesvc_miss_explanations_total", "cachesvc_request_unknown_fields_total", "go_goroutines", "process_cpu_seconds_total",
	} {
		if !strings.Contains(exposition, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics has no family %s after the traffic", name)
		}
	}

	problems, err := promlint.New(bytes.NewReader([]byte(exposition))).Lint()
	if err != nil {
		t.Fatalf("promlint cannot parse /metrics: %v", err)
	}
	for _, pr := range problems {
		if _, ok := lintAllowed[[2]string{pr.Metric, pr.Text}]; ok {
			continue
		}
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
}
