package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// fleet is a real S3 server (versitygw) and the flags that make a
// `cachesvc serve` process a replica on one of its buckets.
type fleet struct {
	s3     *s3test.Server
	bucket string
	bin    string
}

// newFleet starts the S3 server and builds the binary.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	srv := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	return &fleet{s3: srv, bucket: srv.NewBucket(t), bin: buildBinary(t)}
}

// replica starts one replica with a fresh data directory.
func (f *fleet) replica(t *testing.T, extra ...string) *proc {
	t.Helper()
	return f.replicaAt(t, filepath.Join(t.TempDir(), "data"), extra...)
}

// replicaAt starts one replica on data.
func (f *fleet) replicaAt(t *testing.T, data string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--s3-endpoint", f.s3.Endpoint, "--s3-bucket", f.bucket, "--s3-insecure"}, extra...)
	return startServer(t, f.bin, data, args...)
}

// fleetEntry is one uploaded entry: its key and content digest.
type fleetEntry struct {
	key, sha string
	size     int64
}

// putEntry uploads n deterministic bytes of seed under key to p; it
// returns the HTTP status (0 on a transport error).
func putEntry(p *proc, key string, seed uint64, n int64) (int, string) {
	h := sha256.New()
	if _, err := io.Copy(h, newGen(seed, n)); err != nil {
		return 0, ""
	}
	sum := hex.EncodeToString(h.Sum(nil))
	req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/default/entries/"+key, newGen(seed, n))
	req.ContentLength = n
	if n == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("X-Content-SHA256", sum)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, sum
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, sum
}

// getSHA fetches key from p and returns the status and the body's digest.
func getSHA(t *testing.T, p *proc, key string) (int, string) {
	t.Helper()
	resp, err := http.Get(p.url + "/v1/default/entries/" + key)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return resp.StatusCode, "broken body: " + err.Error()
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil))
}

// getBody GETs url and returns the status and the body (a small answer).
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, "broken body: " + err.Error()
	}
	return resp.StatusCode, string(b)
}

// checkServes fails unless p serves every entry with its digest.
func checkServes(t *testing.T, name string, p *proc, entries []fleetEntry) {
	t.Helper()
	for _, e := range entries {
		if code, sum := getSHA(t, p, e.key); code != http.StatusOK || sum != e.sha {
			t.Errorf("replica %s: GET %s (%d bytes) = %d %s, want 200 %s", name, e.key[:12], e.size, code, sum, e.sha[:12])
		}
	}
}

// TestFleetSharesOneBucket runs three replicas on one bucket: what A stores
// B and C serve; with A SIGKILLed, B and C still serve everything; a fourth
// replica with an empty hot tier serves everything from the shared tier;
// and an entry uploaded to a replica killed mid-load is, once acknowledged,
// readable from every other replica (write mode through).
func TestFleetSharesOneBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a, b, c := f.replica(t), f.replica(t), f.replica(t)
	var entries []fleetEntry
	for i, n := range []int64{0, 1, 4 << 10, 100 << 10, 1 << 20, 3<<20 + 7, 17 << 20} {
		key := storeKey(fmt.Sprint("fleet-", i))
		code, sum := putEntry(a, key, uint64(i), n)
		if code != http.StatusCreated {
			t.Fatalf("PUT %d bytes on A = %d:\n%s", n, code, a.stderr.String())
		}
		entries = append(entries, fleetEntry{key, sum, n})
	}
	checkServes(t, "B", b, entries)
	checkServes(t, "C", c, entries)

	a.kill()
	checkServes(t, "C after A died", c, entries)
	d := f.replica(t)
	checkServes(t, "D (empty hot tier)", d, entries)

	// Under load: 8 writers on B, B killed mid-way; every acknowledged
	// entry is on C and D.
	var mu sync.Mutex
	var acked []fleetEntry
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := storeKey(fmt.Sprint("load-", w, "-", i))
				n := int64(64<<10 + (w*i)%(2<<20))
				if code, sum := putEntry(b, key, uint64(1000*w+i), n); code == http.StatusCreated {
					mu.Lock()
					acked = append(acked, fleetEntry{key, sum, n})
					mu.Unlock()
				} else if code == 0 {
					return // B is gone
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	b.kill()
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no upload was acknowledged before the kill")
	}
	t.Logf("%d uploads acknowledged before B was killed", len(acked))
	checkServes(t, "C after B died under load", c, acked)
	checkServes(t, "D after B died under load", d, acked)
}

// TestFleetSharedTierOutage stops the S3 server under a replica: entries in
// its hot tier keep being served, an upload is refused with 503 (write mode
// through: nothing is acknowledged that is not durable), and once S3 is back
// uploads succeed and reach another replica.
func TestFleetSharedTierOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a := f.replica(t)
	hot := storeKey("outage-hot")
	code, sum := putEntry(a, hot, 1, 256<<10)
	if code != http.StatusCreated {
		t.Fatalf("PUT = %d", code)
	}
	f.s3.Stop()
	if code, got := getSHA(t, a, hot); code != http.StatusOK || got != sum {
		t.Errorf("hot entry during the outage: %d %s", code, got)
	}
	key := storeKey("outage-new")
	req, _ := http.NewRequest(http.MethodPut, a.url+"/v1/default/entries/"+key, bytes.NewReader([]byte("compiled")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("shared_tier_unavailable")) {
		t.Errorf("PUT during the outage = %d %s, want 503 shared_tier_unavailable", resp.StatusCode, body)
	}
	// A hot miss cannot be looked up in the shared tier: 503, not 404 (the
	// entry may exist there) and never 200.
	if code, _ := getSHA(t, a, key); code != http.StatusServiceUnavailable {
		t.Errorf("GET of an entry not in the hot tier during the outage = %d, want 503", code)
	}
	f.s3.Restart(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, sum = putEntry(a, key, 2, 100<<10)
		if code == http.StatusCreated || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusCreated {
		t.Fatalf("PUT after S3 came back = %d:\n%s", code, a.stderr.String())
	}
	b := f.replica(t)
	checkServes(t, "B after the outage", b, []fleetEntry{{key, sum, 100 << 10}})
}

// TestFleetCorruptObjectNeverServed corrupts a blob in the bucket (the
// versitygw posix file) and checks that a replica that must fetch it never
// serves it complete.
func TestFleetCorruptObjectNeverServed(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a := f.replica(t)
	key := storeKey("corrupt")
	const n = 2 << 20
	code, sum := putEntry(a, key, 7, n)
	if code != http.StatusCreated {
		t.Fatalf("PUT = %d", code)
	}
	path := f.s3.ObjectPath(f.bucket, "cachesvc/blobs/"+sum)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the blob object: %v", err)
	}
	data[n/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b := f.replica(t)
	for i := 0; i < 2; i++ {
		if code, got := getSHA(t, b, key); code == http.StatusOK && got == sum || got == hex.EncodeToString(sha256Of(data)) {
			t.Fatalf("GET %d of a corrupt object served it complete: %d %s", i, code, got)
		}
	}
}

// sha256Of returns the SHA-256 of b.
func sha256Of(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// storeKey returns the key named by s: the hex SHA-256 of s.
func storeKey(s string) string { return hex.EncodeToString(sha256Of([]byte(s))) }

// TestFleetOneCompileForSixteenHosts sends 16 hosts, spread over three
// replicas, after one missing key at once, each doing what a trainer does:
// ask for the compile lease; the one granted compiles and uploads, the
// others wait (GET ?wait=) on their own replica. Exactly one compiles, and
// every other host gets the entry.
func TestFleetOneCompileForSixteenHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	reps := []*proc{f.replica(t), f.replica(t), f.replica(t)}
	key := storeKey("one-compile")
	var compiles, served atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for h := 0; h < 16; h++ {
		wg.Add(1)
		go func(h int) {
			defer wg.Done()
			p := reps[h%len(reps)]
			<-start
			body := fmt.Sprintf(`{"holder": "host-%d", "ttl_s": 60}`, h)
			resp, err := http.Post(p.url+"/v1/default/leases/"+key, "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("host %d: lease: %v", h, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusCreated:
				compiles.Add(1)
				time.Sleep(500 * time.Millisecond) // the compile
				if code, _ := putEntry(p, key, 42, 1<<20); code != http.StatusCreated {
					t.Errorf("host %d: PUT after compiling = %d", h, code)
				}
				served.Add(1)
			case http.StatusConflict:
				resp, err := http.Get(p.url + "/v1/default/entries/" + key + "?wait=30s")
				if err != nil {
					t.Errorf("host %d: wait: %v", h, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("host %d: GET ?wait= = %d", h, resp.StatusCode)
					return
				}
				served.Add(1)
			default:
				t.Errorf("host %d: lease = %d", h, resp.StatusCode)
			}
		}(h)
	}
	close(start)
	wg.Wait()
	if compiles.Load() != 1 || served.Load() != 16 {
		t.Fatalf("%d hosts compiled (want 1), %d got the entry (want 16)", compiles.Load(), served.Load())
	}
}

// TestFleetRunManifestsAndStats tags uploads and lookups of one run on two
// replicas and reads the run's manifest from a third (what `warm --run`
// uses), then reads every replica's health and the fleet's totals from
// GET /v1/stats?scope=fleet.
func TestFleetRunManifestsAndStats(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a, b, c := f.replica(t), f.replica(t), f.replica(t)
	keys := []string{storeKey("arm-a"), storeKey("arm-b")}
	for i, p := range []*proc{a, b} {
		req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/default/entries/"+keys[i], strings.NewReader("exe"))
		req.Header.Set("X-Cachesvc-Run", "sweep-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT on replica %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	var m struct {
		Keys []struct{ Key string } `json:"keys"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(c.url + "/v1/default/runs/sweep-7/manifest")
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				m.Keys = nil
				json.NewDecoder(resp.Body).Decode(&m)
			}
			resp.Body.Close()
		}
		if len(m.Keys) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(m.Keys) != 2 {
		t.Fatalf("replica C's manifest of the run has %d keys, want both arms' 2: %+v", len(m.Keys), m)
	}

	var st struct {
		Fleet *struct {
			Healthy  int `json:"healthy"`
			Replicas []struct {
				ID, Health string
			} `json:"replicas"`
			Totals struct {
				Totals struct{ Writes int64 } `json:"totals"`
			} `json:"totals"`
		} `json:"fleet"`
		SharedTier *struct{ Configured, Reachable bool } `json:"shared_tier"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(c.url + "/v1/stats?scope=fleet")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st.Fleet != nil && st.Fleet.Healthy == 3 && st.Fleet.Totals.Totals.Writes == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if st.Fleet == nil || st.Fleet.Healthy != 3 || len(st.Fleet.Replicas) != 3 || st.Fleet.Totals.Totals.Writes != 2 {
		t.Errorf("fleet stats: %+v", st.Fleet)
	}
	if st.SharedTier == nil || !st.SharedTier.Configured || !st.SharedTier.Reachable {
		t.Errorf("shared tier state: %+v", st.SharedTier)
	}

	// `cachesvc stats` printed one replica's numbers as if they were the
	// service's, with no way to see the fleet's: it says which it shows,
	// and --scope fleet prints the fleet's totals and every replica.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"stats", "--url", c.url}, []string{"Replica     one replica of a fleet (shared tier reachable)", "--scope fleet shows the fleet's"}},
		// The shared tier's count is the asked replica's view (its last
		// listing plus its own writes): C listed the bucket before A and B
		// wrote, so it counts 0 of the fleet's 2 entries. The line said
		// "for the whole fleet"; it says whose count it is.
		{[]string{"stats", "--url", c.url, "--scope", "fleet"}, []string{"· all namespaces · fleet of 3 replicas", "Replicas    3 of 3 healthy",
			"stored in 2 writes", "REPLICA", st.Fleet.Replicas[0].ID + " ", st.Fleet.Replicas[2].ID + " ",
			"as " + c.url + " listed it ", "Hot tier    0 B in 0 entries on " + c.url + ", the replica asked (no limit)"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%q: output lacks %q:\n%s", tc.args, w, stdout.String())
			}
		}
		if strings.Contains(stdout.String(), "for the whole fleet") {
			t.Errorf("%q: one replica's count of the shared tier is called the whole fleet's:\n%s", tc.args, stdout.String())
		}
	}
}

// TestFleetWriteBehind runs a replica in write mode behind: with the S3
// server stopped, uploads are acknowledged from the hot tier and queued; the
// replica is SIGKILLed with the queue full of them and restarted on the
// same data directory; once S3 is back the queue drains and a second
// replica reads every acknowledged entry from the bucket.
func TestFleetWriteBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	data := filepath.Join(t.TempDir(), "data")
	a := f.replicaAt(t, data, "--write-mode", "behind")
	small := f.replica(t, "--write-mode", "behind", "--upload-queue-entries", "1")
	f.s3.Stop()
	var entries []fleetEntry
	for i := 0; i < 6; i++ {
		key := storeKey(fmt.Sprint("behind-", i))
		n := int64(10<<10 + i*300<<10)
		code, sum := putEntry(a, key, uint64(100+i), n)
		if code != http.StatusCreated {
			t.Fatalf("PUT %d during the outage = %d, want 201 (queued):\n%s", i, code, a.stderr.String())
		}
		entries = append(entries, fleetEntry{key, sum, n})
	}
	checkServes(t, "A during the outage", a, entries)
	// A full queue refuses with 503 and Retry-After, and stores nothing.
	if code, _ := putEntry(small, storeKey("q-1"), 1, 1000); code != http.StatusCreated {
		t.Fatalf("first PUT into a one-entry queue = %d", code)
	}
	req, _ := http.NewRequest(http.MethodPut, small.url+"/v1/default/entries/"+storeKey("q-2"), strings.NewReader("second"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !bytes.Contains(body, []byte("upload_queue_full")) {
		t.Errorf("PUT into a full queue = %d (Retry-After %q) %s, want 503 upload_queue_full with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Killed with its queue full, and restarted while S3 is still down:
	// it starts, and serves its hot tier.
	a.kill()
	a = f.replicaAt(t, data, "--write-mode", "behind")
	// It says so from the start (its Open could not reach the bucket), and
	// stays in the load balancer: 200, "degraded".
	code, ready := getBody(t, a.url+"/readyz")
	for deadline := time.Now().Add(time.Minute); strings.Contains(ready, "plugins_compiling") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		code, ready = getBody(t, a.url+"/readyz")
	}
	if code != http.StatusOK || !strings.Contains(ready, `"status":"degraded"`) || !strings.Contains(ready, `"reachable":false`) {
		t.Errorf("/readyz of A restarted during the outage = %d %s, want 200 degraded, not reachable", code, ready)
	}
	checkServes(t, "A restarted during the outage", a, entries)
	f.s3.Restart(t)
	b := f.replica(t)
	deadline := time.Now().Add(60 * time.Second)
	for _, e := range entries {
		for {
			code, sum := getSHA(t, b, e.key)
			if code == http.StatusOK && sum == e.sha {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("entry %s not on B after the queue should have drained: %d %s\nA:\n%s", e.key[:12], code, sum, a.stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestServeRefusesBadSharedTier: a shared tier that is misconfigured, not
// down, stops `serve` at once with a message that says what to change
// (an outage lets it start, TestFleetWriteBehind).
func TestServeRefusesBadSharedTier(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	for _, tc := range []struct {
		name   string
		args   []string
		secret string
		want   string
	}{
		{"no such bucket", []string{"--s3-endpoint", "http://" + srv.Endpoint, "--s3-bucket", "no-such-bucket"}, s3test.SecretKey,
			"the bucket does not exist: create it (cachesvc creates no buckets) or check --s3-bucket"},
		{"wrong secret", []string{"--s3-endpoint", "http://" + srv.Endpoint, "--s3-bucket", bucket}, "wrong-secret",
			"check the credentials"},
		{"https to a plain-HTTP server", []string{"--s3-endpoint", srv.Endpoint, "--s3-bucket", bucket}, s3test.SecretKey,
			"give --s3-endpoint as http://HOST:PORT (or add --s3-insecure)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--log-level", "error"}, tc.args...)
			var stdout, stderr bytes.Buffer
			if code := run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != 1 {
				t.Fatalf("serve exit %d, want 1; stderr %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("serve's error lacks %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

// TestFleetWarnsOfReplicasConfiguredApart runs two replicas on one bucket
// with different --max-entry-size (an upload one refuses the other stores):
// each heartbeat carries the replica's config, and `cachesvc stats --scope
// fleet` warns, naming the setting, each value and its replica.
func TestFleetWarnsOfReplicasConfiguredApart(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a := f.replica(t, "--replica-id", "replica-a", "--max-entry-size", "1MiB")
	f.replica(t, "--replica-id", "replica-b", "--max-entry-size", "2MiB")
	want := []string{
		"WARNING     replicas disagree on max_entry_size",
		"1.0 MiB: replica-a\n",
		"2.0 MiB: replica-b\n",
	}
	var out string
	// The config rides the heartbeat after the plugins load (every 10 s).
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(time.Second) {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"stats", "--url", a.url, "--scope", "fleet"}, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("stats --scope fleet: exit %d: %s", code, stderr.String())
		}
		out = stdout.String()
		if strings.Contains(out, want[0]) || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "disagree on plugins") || strings.Contains(out, "disagree on namespaces") {
		t.Errorf("replicas that agree on plugins and namespaces were warned of them:\n%s", out)
	}
}
