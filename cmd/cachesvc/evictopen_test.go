package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

// serveData runs `cachesvc serve` in-process on data with args and returns
// its URL and a function that stops it (what SIGTERM does) and waits.
func serveData(t *testing.T, data string, args ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json"}, args...)
	go func() { exited <- run(ctx, all, strings.NewReader(""), &stdout, &stderr) }()
	url := waitURL(t, &stdout, exited)
	return url, func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	}
}

// TestEvictionsAtOpenCounted: a restart with a smaller --max-size evicts
// down to it while the store opens, before the statistics are open. Those
// evictions were lost from the persisted counts: the namespace's
// (totals.evictions, by reason) because the eviction hook had no
// statistics to count them in yet, and the store-wide all-time count
// (store_counters.evictions) because its first sample took the store's
// count since this start as a delta from the last process's final count
// (a drill showed 431 persisted against 5,249 evicted since the start).
func TestEvictionsAtOpenCounted(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	const size = 100 << 10
	put := func(url string, i int) {
		t.Helper()
		body := bytes.Repeat([]byte{byte(i)}, size)
		sum := sha256.Sum256(body)
		key := sha256.Sum256(fmt.Appendf(nil, "key %d", i))
		req, _ := http.NewRequest(http.MethodPut, url+"/v1/default/entries/"+hex.EncodeToString(key[:]), bytes.NewReader(body))
		req.Header.Set(wire.HeaderContentSHA256, hex.EncodeToString(sum[:]))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT entry %d: %s", i, resp.Status)
		}
	}
	type counts struct{ sinceStart, allTime, namespace, bySize int64 }
	read := func(url string) counts {
		t.Helper()
		st := serverStats(t, url)
		c := counts{sinceStart: st.Store.Evictions, allTime: st.StoreCounters.Evictions}
		for _, ns := range st.Namespaces {
			if ns.Namespace == "default" {
				c.namespace, c.bySize = ns.Evictions, ns.EvictionsByReason.Size
			}
		}
		return c
	}

	// 10 entries under 800 KiB: 2 evicted while serving.
	url, stop := serveData(t, data, "--max-size", "800KiB")
	for i := range 10 {
		put(url, i)
	}
	if got, want := read(url), (counts{2, 2, 2, 2}); got != want {
		t.Fatalf("first start: evictions %+v, want %+v", got, want)
	}
	stop()

	// Down to 200 KiB: 6 more evicted as the store opens.
	url, stop = serveData(t, data, "--max-size", "200KiB")
	defer stop()
	if got, want := read(url), (counts{6, 8, 8, 8}); got != want {
		t.Errorf("after a restart that evicted 6 at open: evictions %+v, want %+v (since the start, all-time, the namespace's, its by size)", got, want)
	}
}
