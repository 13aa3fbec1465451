// Package statstest seeds a running cachesvc server with traffic of a known
// shape over real HTTP, for the stats, /metrics, CLI and dashboard tests.
package statstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// The seeded shape: two namespaces, two runs, ten entries, 1,000 lookups of
// which exactly 750 hit.
//
// Lookup i (0 ≤ i < 1000) goes to namespace NS[i%2] under run Runs[(i/2)%2]
// and hits when i%8 < 6. Entries of team-a took 2.5 s to compile, those of
// team-b 4 s. So each namespace has 500 lookups and 375 hits; sweep-1 has
// 500 lookups and 500 hits, sweep-2 500 lookups and 250 hits.
var (
	NS   = [2]string{"team-a", "team-b"}
	Runs = [2]string{"sweep-1", "sweep-2"}
	// CompileSeconds of the entries of NS[0] and NS[1].
	CompileSeconds = [2]float64{2.5, 4}
)

// Expected totals of Seed.
const (
	Lookups      = 1000
	Hits         = 750
	Misses       = 250
	Writes       = 10
	EntryBytes   = 1000 // bytes of each entry
	SavedSeconds = 375*2.5 + 375*4.0
	// Per namespace: lookups and hits; saved seconds are 375 × CompileSeconds.
	NSLookups = 500
	NSHits    = 375
	// Per run: lookups, hits and saved seconds.
	Run1Hits  = 500
	Run2Hits  = 250
	Run1Saved = 250*2.5 + 250*4.0
	Run2Saved = 125*2.5 + 125*4.0
)

// Key returns the key of entry j (0..4) of namespace n.
func Key(n, j int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("statstest %d %d", n, j)))
	return hex.EncodeToString(sum[:])
}

func missKey(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("statstest miss %d", i)))
	return hex.EncodeToString(sum[:])
}

// Seed stores the ten entries and sends the 1,000 lookups to the server at
// base (e.g. http://127.0.0.1:1234). It fails t on any unexpected status.
func Seed(t testing.TB, base string) { SeedWith(t, base, nil) }

// SeedWith is Seed calling before(i) before lookup i (and before(-1) before
// the writes), e.g. to advance a test clock so that the traffic spreads
// over time. before may be nil.
func SeedWith(t testing.TB, base string, before func(i int)) {
	t.Helper()
	if before == nil {
		before = func(int) {}
	}
	before(-1)
	hc := &http.Client{}
	do := func(method, url string, body []byte, want int, headers ...string) {
		t.Helper()
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("statstest: %s %s: %v", method, url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("statstest: %s %s: status %d, want %d", method, url, resp.StatusCode, want)
		}
	}
	for n := range NS {
		for j := 0; j < 5; j++ {
			body := bytes.Repeat([]byte{byte('a' + n*5 + j)}, EntryBytes)
			do(http.MethodPut, fmt.Sprintf("%s/v1/%s/entries/%s", base, NS[n], Key(n, j)), body, http.StatusCreated,
				"X-Compile-Seconds", fmt.Sprint(CompileSeconds[n]), "X-Cachesvc-Backend", "xla",
				"X-Cachesvc-Name", fmt.Sprintf("jit_step_%s_%d", NS[n], j), "X-Cachesvc-Run", Runs[0])
		}
	}
	for i := 0; i < Lookups; i++ {
		before(i)
		n := i % 2
		key, want := Key(n, (i/8)%5), http.StatusOK
		if i%8 >= 6 {
			key, want = missKey(i), http.StatusNotFound
		}
		do(http.MethodGet, fmt.Sprintf("%s/v1/%s/entries/%s", base, NS[n], key), nil, want,
			"X-Cachesvc-Run", Runs[(i/2)%2], "X-Cachesvc-Backend", "xla")
	}
}
