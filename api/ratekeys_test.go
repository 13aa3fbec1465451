package api_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestRateKeysFloodSparesTokens: the rate limiter keeps at most 10,000
// buckets and refuses a new identity while every bucket is in use. Tokens
// and client addresses shared that table, so a client with many addresses
// (behind a trusted proxy, or an IPv6 block with many /64s) sending bad
// tokens from each filled it, and every token not yet seen got 429 for
// requests it never made. Client addresses now have a table of their own.
func TestRateKeysFloodSparesTokens(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) {
		trusting(t, "127.0.0.1")(c)
		// Nothing refills while the test runs, however slow the machine.
		c.Limits.RequestsPerSecond, c.Limits.Burst = 0.001, 2
	})
	url := srv.EntryURL("default", entryKey("flood"))
	const flood, workers = 10000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < flood; i += workers {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer not-a-token")
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					errs <- fmt.Errorf("flood request %d: %d, want 401", i, resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	resp := srv.Do("GET", url, nil, bearer(tokReader)...)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a token's first request after %d addresses sent bad tokens: %d %s, want 404", flood, resp.StatusCode, body)
	}
}
