package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/wire"
)

var redisRE = regexp.MustCompile(`redis protocol on redis://(\S+) \(namespace (\S+)\)`)

// waitReadyz polls /readyz until the built-in plugins are compiled: until
// then the listener answers key commands with an error to retry.
func waitReadyz(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("/readyz never answered 200")
}

// TestServeRedis runs `cachesvc serve --redis-addr` in-process with a
// tokens file: a redis client with a token stores and reads torch entries,
// the HTTP stats and metrics count them, an idle redis connection does not
// hold up the shutdown, and the store closes cleanly.
func TestServeRedis(t *testing.T) {
	tok := authtest.Token{Name: "trainer", Secret: "s3cr3t-trainer-41", Scopes: "torch:write"}
	tokens := authtest.WriteTokens(t, []authtest.Token{tok}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"),
		"--wasm-cache", testWasmCache(t), "--log-format", "json", "--tokens", tokens, "--shutdown-grace", "5s",
		"--redis-addr", "127.0.0.1:0", "--redis-namespace", "torch", "--redis-max-value", "1MiB"}
	go func() { exited <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	url := waitURL(t, &stdout, exited)
	waitReadyz(t, url)
	m := redisRE.FindStringSubmatch(stdout.String())
	if m == nil || m[2] != "torch" {
		t.Fatalf("stdout does not name the redis listener: %q", stdout.String())
	}
	rc := redis.NewClient(&redis.Options{Addr: m[1], Password: tok.Secret, MaxRetries: -1})
	defer rc.Close()
	key := "pt2:fx-graph-v1::fq3v5xkz7w2yhb6c4n8dj0rtmg1lpae9souyi3k5x7b2c4d6e8:c1"
	value := `{"data": "AAAA", "time_taken_ms": 4000}`
	// torch's first GET misses before anything is stored in the namespace:
	// --redis-namespace is configured, so it counts under torch.
	if err := rc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET before the SET: %v, want redis.Nil", err)
	}
	if err := rc.Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := rc.Get(ctx, key).Result(); err != nil || got != value {
		t.Fatalf("GET: %q, %v", got, err)
	}
	if err := rc.Get(ctx, key+"x").Err(); err == nil || !strings.Contains(err.Error(), "is not a torch or Triton cache key") {
		t.Errorf("GET of a bad key: %v", err)
	}
	err := rc.Set(ctx, key, strings.Repeat("v", 2<<20), 0).Err()
	if err == nil || err.Error() != "ERR value of 2097152 bytes exceeds the limit of 1048576 bytes" {
		t.Errorf("SET of 2 MiB past --redis-max-value 1MiB: %v", err)
	}
	if err := rc.Get(ctx, "pt2:autograd-experimental::a0:c1").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET of an absent key after the refused SET: %v, want redis.Nil", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: m[1], MaxRetries: -1})
	defer anon.Close()
	if err := anon.Get(ctx, key).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("GET without a token: %v, want NOAUTH", err)
	}

	get := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if s := get("/v1/torch/stats"); !strings.Contains(s, `"backend":"pt2"`) || !strings.Contains(s, `"hits":1`) ||
		!strings.Contains(s, `"compile_seconds_saved":4`) {
		t.Errorf("namespace stats lack the RESP hit of a pt2 entry: %s", s)
	}
	// Two misses: the GET before the SET and the one after the refused SET.
	var st wire.StatsResponse
	if err := json.Unmarshal([]byte(get("/v1/torch/stats")), &st); err != nil || len(st.Namespaces) != 1 || st.Namespaces[0].Misses != 2 {
		t.Errorf("torch's rows %+v (%v), want 2 misses: the first came before anything was stored", st.Namespaces, err)
	}

	// An idle connection is closed by the shutdown, which completes.
	idle := redis.NewClient(&redis.Options{Addr: m[1], Password: tok.Secret, MaxRetries: -1})
	defer idle.Close()
	if err := idle.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("serve exited %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("serve did not stop after cancellation")
	}
	if strings.Contains(stderr.String(), tok.Secret) {
		t.Error("the log contains the token")
	}
}

// TestServeRedisMetrics: /metrics (without tokens here) carries the
// listener's metrics and the RESP lookups by route.
func TestServeRedisMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"),
		"--wasm-cache", testWasmCache(t), "--log-format", "json", "--redis-addr", "127.0.0.1:0"}
	go func() { exited <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	url := waitURL(t, &stdout, exited)
	waitReadyz(t, url)
	m := redisRE.FindStringSubmatch(stdout.String())
	if m == nil || m[2] != "default" {
		t.Fatalf("stdout does not name the redis listener: %q", stdout.String())
	}
	rc := redis.NewClient(&redis.Options{Addr: m[1]})
	defer rc.Close()
	if err := rc.Get(ctx, "triton:abc:kernel.json").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET: %v", err)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`cachesvc_lookups_by_route_total{result="miss",route="resp"} 1`,
		`cachesvc_resp_commands_total{command="get",result="ok"} 1`,
		`cachesvc_resp_connections 1`,
		`cachesvc_resp_connections_total 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, stderr.String())
	}
}

// TestServeRedisFlags: bad listener flags stop serve with a message naming
// the flag or the limit (usage errors exit 2, before anything opens).
func TestServeRedisFlags(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--redis-addr", "0.0.0.0:0"}, 2, "--redis-addr: refusing to serve without authentication"},
		{[]string{"--redis-addr", "127.0.0.1:0", "--redis-max-conns", "0"}, 2, "--redis-max-conns must be positive"},
		{[]string{"--redis-addr", "127.0.0.1:0", "--redis-max-value", "0"}, 2, "--redis-max-value must be positive"},
		{[]string{"--redis-addr", "127.0.0.1:0", "--redis-namespace", "Bad NS"}, 2, "--redis-namespace: "},
		{[]string{"--redis-addr", "127.0.0.1:0", "--redis-max-buffered", "1MiB"}, 2, "--redis-max-buffered 1.0 MiB cannot hold one SET of the largest value (--redis-max-value 256 MiB"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--wasm-cache", testWasmCache(t)}, tc.args...)
		code := run(context.Background(), args, nil, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
