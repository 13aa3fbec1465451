package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestServeQuotasAndReload runs a real `cachesvc serve --namespaces FILE`:
// team-a filled past its quota evicts only its own entries while team-b's
// stay; an entry bigger than the quota gets 507 quota_exceeded naming the
// namespace and its quota; idle entries of a namespace with max_idle
// expire in the background; SIGHUP with a lower quota evicts team-a down to
// it in the running server, and a broken file keeps the quotas in force
// with a precise error and a failed reload counted.
func TestServeQuotasAndReload(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	const size = 100 << 10
	bin := buildBinary(t)
	nsFile := filepath.Join(t.TempDir(), "namespaces.json")
	write := func(s string) { writeAtomic(t, nsFile, []byte(s)) }
	write(`{
  "namespaces": {
    "team-a": {"max_bytes": "500KiB", "max_entries": 100},
    "brief":  {"max_idle": "1s"}
  }
}`)
	data := filepath.Join(t.TempDir(), "data")
	p := startServer(t, bin, data, "--namespaces", nsFile, "--expiry-interval", "200ms", "--log-level", "info")

	put := func(ns, name string, seed uint64, n int64) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/"+ns+"/entries/"+keyFor(name), newGen(seed, n))
		req.ContentLength = n
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	head := func(ns, name string) int { // not an access
		t.Helper()
		resp, err := http.Head(p.url + "/v1/" + ns + "/entries/" + keyFor(name))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	present := func(ns string, names ...string) []string {
		t.Helper()
		var out []string
		for _, n := range names {
			if head(ns, n) == http.StatusOK {
				out = append(out, n)
			}
		}
		return out
	}
	names := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(prefix, i))
		}
		return out
	}

	// team-b first: its entries are the oldest in the store.
	for i, n := range names("b", 3) {
		if code, body := put("team-b", n, uint64(100+i), size); code != http.StatusCreated {
			t.Fatalf("PUT team-b/%s = %d %s", n, code, body)
		}
	}
	for i, n := range names("a", 8) {
		if code, body := put("team-a", n, uint64(i), size); code != http.StatusCreated {
			t.Fatalf("PUT team-a/%s = %d %s", n, code, body)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// 500 KiB holds five entries of 100 KiB: the three oldest went.
	if got, want := strings.Join(present("team-a", names("a", 8)...), ","), "a3,a4,a5,a6,a7"; got != want {
		t.Fatalf("team-a holds %s, want %s", got, want)
	}
	if got := present("team-b", names("b", 3)...); len(got) != 3 {
		t.Fatalf("team-b holds %v, want all three", got)
	}

	code, body := put("team-a", "huge", 99, 600<<10)
	var eb wire.ErrorBody
	_ = json.Unmarshal(body, &eb)
	if code != http.StatusInsufficientStorage || eb.Error.Code != "quota_exceeded" ||
		!strings.Contains(eb.Error.Message, `Namespace "team-a" is at its quota of 500 KiB (max_bytes)`) {
		t.Fatalf("PUT bigger than the quota = %d %s", code, body)
	}
	t.Logf("507 body: %s", body)

	// max_idle: 1s, passes every 200ms.
	if code, body := put("brief", "x", 7, 1000); code != http.StatusCreated {
		t.Fatalf("PUT brief/x = %d %s", code, body)
	}
	waitFor(t, "brief/x to expire", func() bool { return head("brief", "x") == http.StatusNotFound })

	stats := func() map[string]wire.NamespaceUsage {
		t.Helper()
		st := serverStats(t, p.url)
		out := map[string]wire.NamespaceUsage{}
		for _, u := range st.Store.Namespaces {
			out[u.Namespace] = u
		}
		return out
	}
	u := stats()
	if a := u["team-a"]; a.Entries != 5 || a.Bytes != 5*size || a.MaxBytes != 500<<10 || a.MaxEntries != 100 || a.Evictions != 3 {
		t.Fatalf("team-a usage %+v", a)
	}
	if b := u["team-b"]; b.Entries != 3 || b.Evictions != 0 {
		t.Fatalf("team-b usage %+v", b)
	}
	if br := u["brief"]; br.Expirations != 1 || br.MaxIdleSeconds != 1 {
		t.Fatalf("brief usage %+v", br)
	}

	// SIGHUP with team-a down to two entries: the running server evicts
	// team-a's three least recently used, nothing of team-b.
	write(`{"namespaces": {"team-a": {"max_entries": 2}, "brief": {"max_idle": "1s"}}}`)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, `"namespaces reloaded"`, `"changed":["team-a"]`)
	waitFor(t, "team-a to shrink to its new quota", func() bool { return stats()["team-a"].Entries == 2 })
	if got, want := strings.Join(present("team-a", names("a", 8)...), ","), "a6,a7"; got != want {
		t.Fatalf("team-a holds %s after the reload, want %s", got, want)
	}
	if got := present("team-b", names("b", 3)...); len(got) != 3 {
		t.Fatalf("team-b holds %v after the reload, want all three", got)
	}
	if a := stats()["team-a"]; a.MaxEntries != 2 || a.MaxBytes != 0 {
		t.Fatalf("team-a quota after the reload %+v", a)
	}

	// A broken file: the reload fails as a whole, the quotas stay.
	write("{\"namespaces\": {\"team-a\": {\"max_entries\": 50},\n \"team-b\": {\"max_bites\": 1}}}")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := waitLog(t, p, `"namespaces reload failed; keeping the quotas in force"`)
	if !strings.Contains(line, nsFile+`:2: namespace \"team-b\": unknown field \"max_bites\"`) {
		t.Errorf("reload error line: %s", line)
	}
	if a := stats()["team-a"]; a.MaxEntries != 2 {
		t.Fatalf("a failed reload changed team-a's quota: %+v", a)
	}
	evictionMetrics := []string{
		`cachesvc_namespace_evictions_total{namespace="team-a",reason="quota"} 6`,
		`cachesvc_namespace_evictions_total{namespace="brief",reason="idle"} 1`,
	}
	checkMetrics(t, p.url, append([]string{
		`cachesvc_namespaces_reloads_total{result="ok"} 1`,
		`cachesvc_namespaces_reloads_total{result="failed"} 1`,
		`cachesvc_namespace_entries{namespace="team-a"} 2`,
		`cachesvc_namespace_quota_entries{namespace="team-a"} 2`,
		`cachesvc_namespace_entries{namespace="team-b"} 3`,
	}, evictionMetrics...))
	p.stop(t, 30*time.Second)

	// A restart keeps the per-namespace eviction and expiry counts, as it
	// keeps hits and misses: they are persisted with the statistics.
	write(`{"namespaces": {"team-a": {"max_entries": 2}, "brief": {"max_idle": "1s"}}}`)
	p = startServer(t, bin, data, "--namespaces", nsFile, "--expiry-interval", "200ms", "--log-level", "info")
	u = stats()
	if a := u["team-a"]; a.Entries != 2 || a.Evictions != 6 || a.EvictionsByReason[store.ReasonQuota] != 6 {
		t.Errorf("team-a usage after a restart %+v, want 6 evictions (quota)", a)
	}
	if br := u["brief"]; br.Expirations != 1 || br.EvictionsByReason[store.ReasonIdle] != 1 {
		t.Errorf("brief usage after a restart %+v, want 1 expiration (idle)", br)
	}
	checkMetrics(t, p.url, evictionMetrics)
	p.stop(t, 30*time.Second)
}

// checkMetrics fails t for each of want that the server's /metrics lacks.
func checkMetrics(t *testing.T, url string, want []string) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range want {
		if !strings.Contains(string(metrics), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// TestServeRefusesBadNamespacesFile checks that serve does not start on a
// namespaces file that does not parse, and says where it is wrong.
func TestServeRefusesBadNamespacesFile(t *testing.T) {
	nsFile := filepath.Join(t.TempDir(), "ns.json")
	if err := os.WriteFile(nsFile, []byte("{\n  \"default\": {\"max_bytes\": \"lots\"}\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sio := stdio{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := runServe(t.Context(), []string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--namespaces", nsFile}, sio)
	if err == nil || !strings.Contains(err.Error(), nsFile+`:2: "default": max_bytes: size "lots" must start with a number`) {
		t.Fatalf("serve with a bad namespaces file: %v", err)
	}
}

// keyFor returns a valid key derived from name.
func keyFor(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// writeAtomic replaces path with data atomically (a rename), as an
// operator should before SIGHUP.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits up to two minutes for a log line of p containing every one
// of want and returns it.
func waitLog(t *testing.T, p *proc, want ...string) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if containsAll(line, want) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", want, p.stderr.String())
		}
	}
}

// TestServeCountsConfiguredNamespacesFromTheFirstLookup: a namespace the
// namespaces file names is tracked in the statistics before it holds
// anything, so a sweep's first misses (the first compiles) count under
// it, not under _other; one added by a SIGHUP reload too. The lookups are
// a read-only token's: a writer's would admit any namespace themselves.
func TestServeCountsConfiguredNamespacesFromTheFirstLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	nsFile := filepath.Join(t.TempDir(), "namespaces.json")
	writeAtomic(t, nsFile, []byte(`{"namespaces": {"team-a": {"max_bytes": "1MiB"}}}`))
	const readerSecret, opsSecret = "s3cr3t-reader-nsadmit", "s3cr3t-ops-nsadmit"
	tokens := authtest.WriteTokens(t, []authtest.Token{
		{Name: "reader", Secret: readerSecret, Scopes: "*:read"},
		{Name: "ops", Secret: opsSecret, Scopes: "*:admin"},
	}, "")
	p := startServer(t, bin, filepath.Join(t.TempDir(), "data"), "--namespaces", nsFile, "--tokens", tokens, "--log-level", "info")
	miss := func(ns string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.url+"/v1/"+ns+"/entries/"+keyFor(ns), nil)
		req.Header.Set("Authorization", "Bearer "+readerSecret)
		req.Header.Set("X-Cachesvc-Backend", "xla")
		req.Header.Set("X-Cachesvc-Run", "sweep:arm-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET in %s = %d, want a 404 miss", ns, resp.StatusCode)
		}
	}
	misses := func() (map[string]int64, []string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.url+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+opsSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st wire.StatsResponse
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/stats: %d, %v", resp.StatusCode, err)
		}
		out := map[string]int64{}
		for _, n := range st.Namespaces {
			out[n.Namespace] = n.Misses
		}
		var runNS []string
		for _, r := range st.Runs {
			runNS = append(runNS, r.Namespaces...)
		}
		return out, runNS
	}
	miss("team-a")
	miss("made-up") // not configured, holds nothing: _other
	got, runNS := misses()
	if got["team-a"] != 1 || got["_other"] != 1 {
		t.Errorf("misses by namespace %v, want team-a 1 and _other 1 (made-up)", got)
	}
	if strings.Join(runNS, ",") != "_other,team-a" {
		t.Errorf("the run's namespaces %v, want _other,team-a", runNS)
	}

	writeAtomic(t, nsFile, []byte(`{"namespaces": {"team-a": {"max_bytes": "1MiB"}, "team-b": {"max_entries": 10}}}`))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, `"namespaces reloaded"`, `"added":["team-b"]`)
	miss("team-b")
	if got, _ := misses(); got["team-b"] != 1 || got["_other"] != 1 {
		t.Errorf("after the reload, misses by namespace %v, want team-b 1 and _other still 1", got)
	}
	p.stop(t, 30*time.Second)
}
