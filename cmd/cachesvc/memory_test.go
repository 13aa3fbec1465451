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
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemoryBigRoundTrip uploads and downloads a 2 GiB entry through a
// `cachesvc serve` subprocess and checks that the server's anonymous resident
// memory (RssAnon: heap and stacks, not Badger's memory-mapped files) grows
// by less than 128 MiB. It writes 2 GiB to disk, so it runs only with
// CACHESVC_BIG_TESTS=1 (scripts/test.sh sets it).
func TestMemoryBigRoundTrip(t *testing.T) {
	if os.Getenv("CACHESVC_BIG_TESTS") != "1" {
		t.Skip("set CACHESVC_BIG_TESTS=1 to run the 2 GiB memory test")
	}
	const (
		size  = 2 << 30
		bound = 128 << 20
	)
	bin := buildBinary(t)
	p := startServer(t, bin, filepath.Join(t.TempDir(), "data"))
	url := fmt.Sprintf("%s/v1/default/entries/%064x", p.url, 0xb16)

	// The built-in plugins compile in the background after start (a cold
	// wasm cache: wazero's compiler takes ~100 MiB for a while); the bound
	// is about streaming entries, so wait for /readyz before the baseline.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		status, _ := getSum(t, p.url+"/readyz")
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz = %d after 5 minutes", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Warm up (first requests allocate pools), then take the baseline.
	for i := 0; i < 3; i++ {
		status, _ := getSum(t, p.url+"/healthz")
		if status != 200 {
			t.Fatalf("healthz = %d", status)
		}
	}
	base := p.rssAnon(t)
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if r := p.rssAnon(t); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()

	start := time.Now()
	h := sha256.New()
	req, _ := http.NewRequest(http.MethodPut, url, io.TeeReader(newGen(42, size), h))
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	var pr struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	err = json.NewDecoder(resp.Body).Decode(&pr)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d, %v", resp.StatusCode, err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	if pr.SHA256 != want || pr.Size != size {
		t.Fatalf("PUT stored %d bytes sha256 %s, want %d %s", pr.Size, pr.SHA256, int64(size), want)
	}
	putTime := time.Since(start)

	start = time.Now()
	status, got := getSum(t, url)
	getTime := time.Since(start)
	close(stop)
	wg.Wait()
	if status != 200 || got != want {
		t.Fatalf("GET = %d sha256 %s, want 200 %s", status, got, want)
	}
	growth := peak.Load() - base
	t.Logf("2 GiB round trip: PUT %s (%.0f MiB/s), GET %s (%.0f MiB/s); RssAnon base %d MiB, peak %d MiB, growth %.1f MiB (bound %d MiB)",
		putTime.Round(time.Millisecond), float64(size>>20)/putTime.Seconds(),
		getTime.Round(time.Millisecond), float64(size>>20)/getTime.Seconds(),
		base>>20, peak.Load()>>20, float64(growth)/(1<<20), bound>>20)
	if growth >= bound {
		t.Errorf("RssAnon grew by %d MiB, over the %d MiB bound", growth>>20, bound>>20)
	}
	p.stop(t, 30*time.Second)
}
