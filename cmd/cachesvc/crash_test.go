package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// genReader is a deterministic pseudo-random stream of n bytes.
type genReader struct {
	rng  *rand.ChaCha8
	left int64
}

func newGen(seed uint64, n int64) *genReader {
	var s [32]byte
	for i := 0; i < 8; i++ {
		s[i] = byte(seed >> (8 * i))
	}
	return &genReader{rng: rand.NewChaCha8(s), left: n}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, _ := g.rng.Read(p)
	g.left -= int64(n)
	return n, nil
}

// crashSizes are the upload sizes the crash test cycles through.
var crashSizes = []int64{0, 1, 4 << 10, 100 << 10, 1 << 20, 1<<20 + 7, 3 << 20, 8 << 20}

// TestCrashRecovery starts `cachesvc serve` as a subprocess, runs 32
// concurrent uploaders, SIGKILLs the server mid-way, restarts it on the same
// data directory and checks that every upload acknowledged with 2xx before
// the kill is present and intact, and that every visible entry matches its
// SHA-256. CACHESVC_CRASH_REPEAT=N repeats the kill/restart cycle N times.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	repeat := 1
	if v := os.Getenv("CACHESVC_CRASH_REPEAT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CACHESVC_CRASH_REPEAT=%q: want a positive integer", v)
		}
		repeat = n
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	acked := map[string]string{} // key → sha256 hex, over all rounds
	for round := 0; round < repeat; round++ {
		crashRound(t, bin, data, round, acked)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}

// upload is one attempted PUT.
type upload struct {
	key, sum string
}

func crashRound(t *testing.T, bin, data string, round int, acked map[string]string) {
	p := startServer(t, bin, data)
	const uploaders = 32
	var (
		mu        sync.Mutex
		attempted []upload
		newAcks   = map[string]string{}
		ackCount  atomic.Int64
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	client := &http.Client{Timeout: 60 * time.Second}
	for w := 0; w < uploaders; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				seed := uint64(round)<<40 | uint64(w)<<20 | uint64(i)
				size := crashSizes[(w+i)%len(crashSizes)]
				h := sha256.New()
				io.Copy(h, newGen(seed, size))
				sum := hex.EncodeToString(h.Sum(nil))
				key := fmt.Sprintf("%064x", seed)
				mu.Lock()
				attempted = append(attempted, upload{key, sum})
				mu.Unlock()
				req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/crash/entries/"+key, newGen(seed, size))
				req.ContentLength = size
				if size == 0 {
					req.Body = http.NoBody
				}
				req.Header.Set("X-Content-SHA256", sum)
				resp, err := client.Do(req)
				if err != nil {
					continue // the server died mid-request: not acknowledged
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					mu.Lock()
					newAcks[key] = sum
					mu.Unlock()
					ackCount.Add(1)
				} else if resp.StatusCode != 0 {
					t.Errorf("PUT %s (%d bytes) = %d", key, size, resp.StatusCode)
				}
			}
		}(w)
	}
	// Kill once a fair number of uploads have been acknowledged, so that
	// plenty are in flight at the moment of the kill.
	deadline := time.Now().Add(2 * time.Minute)
	for ackCount.Load() < 48 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.kill()
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	for k, v := range newAcks {
		acked[k] = v
	}
	inFlight := len(attempted) - len(newAcks)
	mu.Unlock()
	t.Logf("round %d: %d uploads acknowledged before SIGKILL, %d cut off", round, len(newAcks), inFlight)

	// Restart on the same directory; every acknowledged upload is intact.
	p = startServer(t, bin, data)
	for key, sum := range acked {
		status, got := getSum(t, p.url+"/v1/crash/entries/"+key)
		if status != 200 || got != sum {
			t.Errorf("acknowledged entry %s: GET %d sha256 %s, want 200 %s", key, status, got, sum)
		}
	}
	// Unacknowledged uploads are either absent or complete and intact.
	var visible int
	for _, u := range attempted {
		if _, ok := acked[u.key]; ok {
			continue
		}
		status, got := getSum(t, p.url+"/v1/crash/entries/"+u.key)
		switch {
		case status == 404:
		case status == 200 && got == u.sum:
			visible++
		default:
			t.Errorf("unacknowledged entry %s: GET %d sha256 %s, want 404 or 200 %s", u.key, status, got, u.sum)
		}
	}
	t.Logf("round %d: %d unacknowledged uploads became visible (complete and intact)", round, visible)
	p.stop(t, 30*time.Second)

	// Read every visible entry straight from the store: each matches its
	// recorded SHA-256.
	st, err := store.Open(store.Config{Dir: data, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer st.Close()
	var metas []store.Meta
	if err := st.Walk(context.Background(), "", func(m store.Meta) bool { metas = append(metas, m); return true }); err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		_, rc, err := st.Get(context.Background(), m.Namespace, m.Key, 0, -1)
		if err != nil {
			t.Errorf("get %s: %v", m.Key, err)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil || n != m.Size || [32]byte(h.Sum(nil)) != m.SHA256 {
			t.Errorf("entry %s: read %d of %d bytes, err %v, digest mismatch %v", m.Key, n, m.Size, err, [32]byte(h.Sum(nil)) != m.SHA256)
		}
	}
	t.Logf("round %d: %d entries in the store, all match their SHA-256", round, len(metas))
}

// getSum GETs url and returns the status and the body's SHA-256.
func getSum(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return resp.StatusCode, "read error: " + err.Error()
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil))
}
