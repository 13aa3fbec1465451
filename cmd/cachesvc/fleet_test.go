package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
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
