package main

import (
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exposition is one scrape of /metrics: the samples' lines by family
// (the name of its "# TYPE" line).
type exposition map[string][]string

// scrape reads url's /metrics.
func scrape(t *testing.T, url string) exposition {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	exp := exposition{}
	family := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family, _, _ = strings.Cut(f, " ")
			exp[family] = nil
		} else if line != "" && !strings.HasPrefix(line, "#") {
			exp[family] = append(exp[family], line)
		}
	}
	return exp
}

// value returns the value of the sample line.
func sampleValue(t *testing.T, line string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("sample %q: %v", line, err)
	}
	return v
}

// monitoredReplica starts a fleet replica (a real versitygw bucket) with
// the Redis listener, sends it some traffic, and returns its URL.
func monitoredReplica(t *testing.T) string {
	t.Helper()
	f := newFleet(t)
	p := f.replica(t, "--redis-addr", "127.0.0.1:0")
	waitReadyz(t, p.url)
	key := strings.Repeat("e5", 32)
	if code, _ := putEntry(p, key, 1, 1000); code != 201 {
		t.Fatalf("PUT: %d", code)
	}
	for _, path := range []string{"/v1/default/entries/" + key, "/v1/default/entries/" + strings.Repeat("f6", 32), "/v1/stats"} {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A signature the plugin rejects: the plugin failure series appear.
	resp, err := http.Post(p.url+"/v1/default/keys", "application/json", strings.NewReader(`{"backend":"passthrough","kind":"Bad!","key":"jit_f-mon"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("POST keys with a signature the plugin rejects: %d, want 422", resp.StatusCode)
	}
	return p.url
}

// alertsDir holds the alert rules and their promtool unit tests.
var alertsDir = filepath.Join("..", "..", "scripts", "monitoring")

// metricName matches a cachesvc metric in an expression or annotation
// (recorded series are named cachesvc:..., so they do not match).
var metricName = regexp.MustCompile(`\bcachesvc_[a-z0-9_]+`)

// promtoolPath finds promtool where scripts/promtool.sh builds it (the
// tools' cache directory, as for versitygw) or on PATH, or skips the test
// (fails with CACHESVC_REQUIRE_PROMTOOL set).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if cache, err := os.UserCacheDir(); err == nil {
		if p := filepath.Join(cache, "cachesvc", "bin", "promtool"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	const build = "scripts/promtool.sh builds it (5 to 11 minutes cold)"
	if os.Getenv("CACHESVC_REQUIRE_PROMTOOL") != "" {
		t.Fatal("promtool not found and CACHESVC_REQUIRE_PROMTOOL is set: " + build)
	}
	t.Skip("promtool not found, so scripts/monitoring/alerts.yml is not checked by it: " + build + "; CACHESVC_REQUIRE_PROMTOOL=1 makes this a failure")
	return ""
}

// fileExists reports whether path names a regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// leBound matches a histogram bucket's upper bound.
var leBound = regexp.MustCompile(`le="([^"]+)"`)

// TestMonitoring scrapes a real fleet replica as a platform team's
// Prometheus would and checks what its dashboards and alerts rely on.
func TestMonitoring(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary with an S3 server")
	}
	url := monitoredReplica(t)

	// The request-duration buckets span a hot GET (100 µs) to the longest
	// ?wait= long poll (300 s): they stopped at 120 s, so every long poll
	// that waited longer landed in +Inf alone.
	t.Run("duration buckets", func(t *testing.T) {
		lo, hi := math.Inf(1), 0.0
		for _, line := range scrape(t, url)["cachesvc_http_request_duration_seconds"] {
			if m := leBound.FindStringSubmatch(line); m != nil && m[1] != "+Inf" {
				le, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					t.Fatal(err)
				}
				lo, hi = min(lo, le), max(hi, le)
			}
		}
		if lo > 0.0001 || hi < 300 {
			t.Errorf("request duration buckets span %g s to %g s, want 0.0001 s (or less) to 300 s (MaxWait)", lo, hi)
		}
	})

	// Which version every replica runs, for an alert on a fleet left on
	// mixed versions after a rollout.
	t.Run("build info", func(t *testing.T) {
		want := `cachesvc_build_info{goversion="` + runtime.Version() + `",version="` + appVersion() + `"} 1`
		if got := scrape(t, url)["cachesvc_build_info"]; len(got) != 1 || got[0] != want {
			t.Errorf("cachesvc_build_info = %q, want %q", got, want)
		}
	})

	// When this replica last wrote its heartbeat: set by the first one,
	// written at start.
	t.Run("heartbeat timestamp", func(t *testing.T) {
		var got []string
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = scrape(t, url)["cachesvc_fleet_heartbeat_timestamp_seconds"]; len(got) == 1 && sampleValue(t, got[0]) > 0 {
				break
			}
		}
		if len(got) != 1 {
			t.Fatalf("cachesvc_fleet_heartbeat_timestamp_seconds: %q, want one sample", got)
		}
		// A Unix time, not an age or nanoseconds: after this test began.
		if v := sampleValue(t, got[0]); v < float64(testStart.Unix()) || v > 1e11 {
			t.Errorf("cachesvc_fleet_heartbeat_timestamp_seconds = %v, want the Unix time (in seconds) of a heartbeat this test saw", v)
		}
	})

	// Alerts that name a metric the server does not export never fire:
	// every cachesvc_* name in alerts.yml (expressions and the metrics
	// the descriptions tell an operator to look at) is a family of a
	// replica's /metrics.
	t.Run("alerts name exported metrics", func(t *testing.T) {
		rules, err := os.ReadFile(filepath.Join(alertsDir, "alerts.yml"))
		if err != nil {
			t.Fatal(err)
		}
		exp := scrape(t, url)
		names := map[string]bool{}
		for _, name := range metricName.FindAllString(string(rules), -1) {
			names[name] = true
		}
		if len(names) < 10 {
			t.Fatalf("alerts.yml names only %d metrics: %v; the scan is broken", len(names), names)
		}
		for name := range names {
			family := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok {
					if _, isHistogram := exp[base]; isHistogram {
						family = base
					}
				}
			}
			if _, ok := exp[family]; !ok {
				t.Errorf("alerts.yml names %s, which a replica's /metrics does not export", name)
			}
		}
	})

	// The rules load in Prometheus, and each alert fires when its unit
	// test says it should, with the annotations given.
	t.Run("promtool", func(t *testing.T) {
		promtool := promtoolPath(t)
		for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
			cmd := exec.Command(promtool, args...)
			cmd.Dir = alertsDir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
}

// testStart is when the test binary started.
var testStart = time.Now()

// TestPluginFailureSeriesFromStart: once a server's plugins load, every
// failure series the CachesvcPluginFailures alert watches is exported at
// 0. Before, a series was born at 1 with a plugin's first failure, and
// increase() over a series that starts at 1 is 0: the first timeout (or
// trap, or exhausted memory) of each plugin after a start never alerted.
func TestPluginFailureSeriesFromStart(t *testing.T) {
	url := startServe(t)
	waitReadyz(t, url)
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		have := map[string]bool{}
		for _, line := range scrape(t, url)["cachesvc_plugin_failures_total"] {
			have[line] = true
		}
		missing = missing[:0]
		for _, plugin := range []string{"passthrough@1.0.0", "pt2@1.0.0", "xla@1.0.0"} {
			for _, kind := range []string{"timeout", "trap", "memory", "output", "busy", "other"} {
				if line := `cachesvc_plugin_failures_total{kind="` + kind + `",plugin="` + plugin + `"} 0`; !have[line] {
					missing = append(missing, line)
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, line := range missing {
		t.Errorf("/metrics lacks %s once the plugins are ready", line)
	}
}
