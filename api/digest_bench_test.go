package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"sort"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
	"github.com/cachesvc/cachesvc/wire"
)

// benchLookup measures a repeated lookup hit of a 10 MiB xla module over a
// real socket and a real store, sending the full signature or only its
// digest. It reports the request's upload (headers and body: up-B/op) and
// the p50 latency, the targets (≤ 1 KiB, ≤ 2 ms for the digest).
//
//	go test -run '^$' -bench 'Lookup(Full|Digest)' ./api/
func benchLookup(b *testing.B, digestOnly bool) {
	k := keyingtest.Keyer(b, plugins.Config{}, keying.Config{})
	srv := apitest.Start(b, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	sig := xlacanon.GenerateSignature(10 << 20)
	d := sigDigest(sig)
	// A first full request teaches the memo, as a trainer's first lookup.
	resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/keys", bytes.NewReader(sig))
	var kr wire.KeyResponse
	if body := apitest.ReadAll(b, resp); resp.StatusCode != 200 || json.Unmarshal(body, &kr) != nil {
		b.Fatalf("keys: %d %s", resp.StatusCode, body)
	}
	key := kr.Key
	exe := bytes.Repeat([]byte("x"), 4<<10)
	resp = srv.Do(http.MethodPut, srv.EntryURL("default", key), bytes.NewReader(exe))
	apitest.ReadAll(b, resp)
	newReq := func() *http.Request {
		var body io.Reader = bytes.NewReader(sig)
		if digestOnly {
			body = http.NoBody
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/default/lookup", body)
		req.Header.Set(wire.HeaderSignatureSHA256, d)
		req.Header.Set(wire.HeaderBackend, "xla")
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	dump, err := httputil.DumpRequestOut(newReq(), true)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := http.DefaultClient.Do(newReq())
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode != 200 || n != int64(len(exe)) {
			b.Fatalf("lookup = %d, %d bytes", resp.StatusCode, n)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(len(dump)), "up-B/op")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkLookupFull is a repeated lookup hit sending the 10 MiB signature
// (the memo skips the plugin; the upload and its hash remain).
func BenchmarkLookupFull(b *testing.B) { benchLookup(b, false) }

// BenchmarkLookupDigest is the same lookup sending only the digest.
func BenchmarkLookupDigest(b *testing.B) { benchLookup(b, true) }
