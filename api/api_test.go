package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// keyOf returns a valid key derived from name.
func keyOf(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

// payload is a deterministic pseudo-random byte stream of a given length,
// generated on the fly so that large bodies never sit in memory.
type payload struct {
	rng  *rand.ChaCha8
	left int64
}

func newPayload(seed uint64, n int64) *payload {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	s[2], s[3] = byte(seed>>16), byte(seed>>24)
	return &payload{rng: rand.NewChaCha8(s), left: n}
}

func (p *payload) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, _ := p.rng.Read(b)
	p.left -= int64(n)
	return n, nil
}

// digest returns the hex SHA-256 of the payload (seed, n).
func digest(seed uint64, n int64) string {
	h := sha256.New()
	if _, err := io.Copy(h, newPayload(seed, n)); err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// put uploads payload (seed, n) under key with a Content-Length and returns
// the response (body read).
func put(t *testing.T, srv *apitest.Server, ns, key string, seed uint64, n int64, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.EntryURL(ns, key), newPayload(seed, n))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	if n == 0 {
		req.Body = http.NoBody
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", key, err)
	}
	return resp, apitest.ReadAll(t, resp)
}

// getDigest GETs an entry and returns the status and the SHA-256 of the body
// (streamed, never held whole).
func getDigest(t *testing.T, srv *apitest.Server, ns, key string) (int, string, http.Header) {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.EntryURL(ns, key), nil)
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		t.Fatalf("GET %s: read body: %v", key, err)
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil)), resp.Header
}

// errorCode checks body is the JSON error shape and returns its code.
func errorCode(t *testing.T, resp *http.Response, body []byte) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("error body %s lacks code or message", body)
	}
	return e.Error.Code
}

func TestRoundTrip(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	sizes := []struct {
		name string
		n    int64
	}{
		{"0B", 0}, {"1B", 1}, {"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"1MiB+1", 1<<20 + 1},
		{"300MiB", 300 << 20},
	}
	for i, tc := range sizes {
		t.Run(tc.name, func(t *testing.T) {
			if tc.n > 64<<20 && testing.Short() {
				t.Skip("large round trip skipped in -short mode")
			}
			key := keyOf("roundtrip-" + tc.name)
			seed := uint64(100 + i)
			want := digest(seed, tc.n)
			resp, body := put(t, srv, "default", key, seed, tc.n,
				wire.HeaderContentSHA256, want, wire.HeaderCompileSeconds, "12.5",
				wire.HeaderBackend, "xla", wire.HeaderName, "jit_train_step", wire.HeaderRun, "run-1")
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("PUT status = %d, body %s", resp.StatusCode, body)
			}
			var pr wire.PutResponse
			if err := json.Unmarshal(body, &pr); err != nil {
				t.Fatal(err)
			}
			if pr.Size != tc.n || pr.SHA256 != want || !pr.Created || pr.Key != key || pr.Namespace != "default" {
				t.Errorf("PUT body = %+v", pr)
			}
			status, got, h := getDigest(t, srv, "default", key)
			if status != http.StatusOK || got != want {
				t.Fatalf("GET status %d digest %s, want 200 %s", status, got, want)
			}
			for name, v := range map[string]string{
				"Content-Length":          fmt.Sprint(tc.n),
				"ETag":                    `"` + want + `"`,
				wire.HeaderContentSHA256:  want,
				wire.HeaderCompileSeconds: "12.5",
				wire.HeaderBackend:        "xla",
				wire.HeaderName:           "jit_train_step",
			} {
				if h.Get(name) != v {
					t.Errorf("GET %s = %q, want %q", name, h.Get(name), v)
				}
			}
			// HEAD: same headers, no body.
			resp = srv.Do(http.MethodHead, srv.EntryURL("default", key), nil)
			b := apitest.ReadAll(t, resp)
			if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("Content-Length") != fmt.Sprint(tc.n) || resp.Header.Get(wire.HeaderContentSHA256) != want {
				t.Errorf("HEAD = %d, %d body bytes, headers %v", resp.StatusCode, len(b), resp.Header)
			}
			// Identical re-upload is a 200 no-op.
			resp, body = put(t, srv, "default", key, seed, tc.n)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("identical re-PUT status = %d, body %s", resp.StatusCode, body)
			}
		})
	}
}

func TestChunkedUpload(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("chunked")
	want := digest(7, 3<<20+5)
	// An io.Reader of unknown length makes net/http send chunked encoding.
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", key), io.MultiReader(newPayload(7, 3<<20+5)), wire.HeaderContentSHA256, want)
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusCreated {
		t.Fatalf("chunked PUT = %d %s", resp.StatusCode, b)
	}
	if status, got, _ := getDigest(t, srv, "default", key); status != 200 || got != want {
		t.Fatalf("GET = %d %s, want %s", status, got, want)
	}
}

func TestDedupAcrossKeys(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	const n = 2<<20 + 3
	for i, ns := range []string{"default", "default", "team-a"} {
		resp, body := put(t, srv, ns, keyOf(fmt.Sprint("dedup", i)), 9, n)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %d = %d %s", i, resp.StatusCode, body)
		}
	}
	u := srv.Store.Usage()
	if u.Entries != 3 || u.Blobs != 1 || u.Bytes != n {
		t.Errorf("usage = %+v, want 3 entries sharing 1 blob of %d bytes", u, n)
	}
	// Deleting one entry keeps the shared blob for the others.
	resp := srv.Do(http.MethodDelete, srv.EntryURL("default", keyOf("dedup0")), nil)
	if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	if status, got, _ := getDigest(t, srv, "default", keyOf("dedup1")); status != 200 || got != digest(9, n) {
		t.Errorf("GET after deleting a sharing entry = %d", status)
	}
}

func TestPutErrors(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1 << 20})
	existing := keyOf("existing")
	if resp, body := put(t, srv, "default", existing, 1, 1000); resp.StatusCode != 201 {
		t.Fatalf("setup PUT = %d %s", resp.StatusCode, body)
	}
	tests := []struct {
		name       string
		ns, key    string
		seed       uint64
		n          int64
		chunked    bool
		headers    []string
		wantStatus int
		wantCode   string
	}{
		{"conflict", "default", existing, 2, 1000, false, nil, 409, "conflict"},
		{"digest mismatch", "default", keyOf("dm"), 3, 5000, false, []string{wire.HeaderContentSHA256, digest(4, 5000)}, 400, "digest_mismatch"},
		{"digest malformed", "default", keyOf("dmf"), 3, 10, false, []string{wire.HeaderContentSHA256, "abc"}, 400, "bad_header"},
		{"digest not hex", "default", keyOf("dnh"), 3, 10, false, []string{wire.HeaderContentSHA256, strings.Repeat("zz", 32)}, 400, "bad_header"},
		{"compile seconds", "default", keyOf("cs"), 3, 10, false, []string{wire.HeaderCompileSeconds, "-1"}, 400, "bad_header"},
		{"name too long", "default", keyOf("nl"), 3, 10, false, []string{wire.HeaderName, strings.Repeat("n", 300)}, 400, "bad_header"},
		{"bad key", "default", "ABC", 3, 10, false, nil, 400, "bad_key"},
		{"uppercase key", "default", strings.ToUpper(keyOf("u")), 3, 10, false, nil, 400, "bad_key"},
		{"bad namespace", "Bad_NS", keyOf("bn"), 3, 10, false, nil, 400, "bad_namespace"},
		{"too large declared", "default", keyOf("tl"), 3, 1<<20 + 1, false, nil, 413, "entry_too_large"},
		{"too large chunked", "default", keyOf("tlc"), 3, 3 << 20, true, nil, 413, "entry_too_large"},
		{"gzip encoded", "default", keyOf("gz"), 3, 5000, false, []string{"Content-Encoding", "gzip"}, 415, "unsupported_encoding"},
		{"br encoded chunked", "default", keyOf("br"), 3, 100 << 10, true, []string{"Content-Encoding", "br"}, 415, "unsupported_encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			if tc.chunked {
				resp = srv.Do(http.MethodPut, srv.EntryURL(tc.ns, tc.key), io.MultiReader(newPayload(tc.seed, tc.n)), tc.headers...)
				body = apitest.ReadAll(t, resp)
			} else {
				resp, body = put(t, srv, tc.ns, tc.key, tc.seed, tc.n, tc.headers...)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			if code := errorCode(t, resp, body); code != tc.wantCode {
				t.Errorf("code = %q, want %q (body %s)", code, tc.wantCode, body)
			}
			if tc.key != existing && tc.wantCode != "bad_key" && tc.wantCode != "bad_namespace" {
				if st, _, _ := getDigest(t, srv, "default", tc.key); st != 404 {
					t.Errorf("after a failed PUT, GET = %d, want 404", st)
				}
			}
		})
	}
	// The conflicting PUT left the stored entry untouched.
	if status, got, _ := getDigest(t, srv, "default", existing); status != 200 || got != digest(1, 1000) {
		t.Errorf("existing entry after conflict: %d %s", status, got)
	}
	if u := srv.Store.Usage(); u.Entries != 1 {
		t.Errorf("entries = %d after rejected uploads, want 1", u.Entries)
	}
}

func TestStoreFull(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxBytes: 1 << 20})
	resp, body := put(t, srv, "default", keyOf("big"), 1, 1<<20+1)
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Fatalf("status = %d, want 507; body %s", resp.StatusCode, body)
	}
	if code := errorCode(t, resp, body); code != "store_full" {
		t.Errorf("code = %q", code)
	}
	// Chunked (size unknown up front): refused while streaming.
	resp = srv.Do(http.MethodPut, srv.EntryURL("default", keyOf("big2")), io.MultiReader(newPayload(2, 3<<20)))
	body = apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Fatalf("chunked status = %d, want 507; body %s", resp.StatusCode, body)
	}
	if u := srv.Store.Usage(); u.Entries != 0 || u.Bytes != 0 {
		t.Errorf("usage after 507s = %+v", u)
	}
}

func TestEvictionByLastAccess(t *testing.T) {
	const n = 1 << 20
	srv := apitest.Start(t, apitest.Options{MaxBytes: 3 * n})
	for i, name := range []string{"a", "b", "c"} {
		if resp, body := put(t, srv, "default", keyOf(name), uint64(i), n); resp.StatusCode != 201 {
			t.Fatalf("PUT %s = %d %s", name, resp.StatusCode, body)
		}
	}
	// Touch a: b becomes the least recently accessed.
	if st, _, _ := getDigest(t, srv, "default", keyOf("a")); st != 200 {
		t.Fatalf("GET a = %d", st)
	}
	if resp, body := put(t, srv, "default", keyOf("d"), 3, n); resp.StatusCode != 201 {
		t.Fatalf("PUT d = %d %s", resp.StatusCode, body)
	}
	for name, want := range map[string]int{"a": 200, "b": 404, "c": 200, "d": 200} {
		resp := srv.Do(http.MethodHead, srv.EntryURL("default", keyOf(name)), nil)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("HEAD %s = %d, want %d", name, resp.StatusCode, want)
		}
	}
	if v := srv.Metric("cachesvc_evictions_total"); v != 1 {
		t.Errorf("cachesvc_evictions_total = %v, want 1", v)
	}
}

func TestPersistenceAcrossRestart(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("persist")
	want := digest(5, 3<<20)
	if resp, body := put(t, srv, "ns.one", key, 5, 3<<20, wire.HeaderCompileSeconds, "3"); resp.StatusCode != 201 {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	srv.Restart()
	status, got, h := getDigest(t, srv, "ns.one", key)
	if status != 200 || got != want || h.Get(wire.HeaderCompileSeconds) != "3" {
		t.Fatalf("after restart GET = %d %s %v", status, got, h)
	}
}

func TestTamperedValueNotServed(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	const n = 64 << 10
	key := keyOf("tamper")
	if resp, body := put(t, srv, "default", key, 11, n); resp.StatusCode != 201 {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	srv.Close()
	needle := make([]byte, 64)
	p := newPayload(11, n)
	io.ReadFull(p, make([]byte, 1000))
	io.ReadFull(p, needle)
	if _, err := storetest.FlipInValueLog(srv.Dir, needle); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	resp := srv.Do(http.MethodGet, srv.EntryURL("default", key), nil)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode == 200 {
		t.Fatalf("tampered entry served: %d bytes", len(body))
	}
	if err == nil {
		if resp.StatusCode != 500 || errorCode(t, resp, body) != "integrity_failure" {
			t.Errorf("GET tampered = %d %s, want 500 integrity_failure", resp.StatusCode, body)
		}
	}
	// Quarantined: now a miss.
	if st, _, _ := getDigest(t, srv, "default", key); st != 404 {
		t.Errorf("GET after quarantine = %d, want 404", st)
	}
	if v := srv.Metric("cachesvc_integrity_failures_total"); v != 1 {
		t.Errorf("cachesvc_integrity_failures_total = %v, want 1", v)
	}
}

func TestTamperedLaterChunkAbortsBody(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	const n = 5 << 20
	key := keyOf("tamper-late")
	if resp, body := put(t, srv, "default", key, 12, n); resp.StatusCode != 201 {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	srv.Close()
	// Corrupt the 4th MiB: the first chunks verify, so headers go out.
	p := newPayload(12, n)
	io.CopyN(io.Discard, p, 4<<20+1234)
	needle := make([]byte, 64)
	io.ReadFull(p, needle)
	if _, err := storetest.FlipInValueLog(srv.Dir, needle); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	resp := srv.Do(http.MethodGet, srv.EntryURL("default", key), nil)
	h := sha256.New()
	_, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode == 200 {
		t.Fatalf("a complete body was served for a corrupt entry (digest %x)", h.Sum(nil))
	}
	t.Logf("GET tampered entry: status %d, read error %v", resp.StatusCode, err)
}

func TestRange(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	const n = 3<<20 + 17
	key := keyOf("range")
	if resp, body := put(t, srv, "default", key, 13, n); resp.StatusCode != 201 {
		t.Fatalf("PUT = %d %s", resp.StatusCode, body)
	}
	all := make([]byte, n) // 3 MiB is fine to hold in a test
	io.ReadFull(newPayload(13, n), all)
	tests := []struct {
		rng        string
		wantStatus int
		off, end   int64 // inclusive end
	}{
		{"bytes=0-0", 206, 0, 0},
		{"bytes=10-19", 206, 10, 19},
		{"bytes=1048570-2097160", 206, 1048570, 2097160},
		{"bytes=3145000-", 206, 3145000, n - 1},
		{"bytes=-100", 206, n - 100, n - 1},
		{"bytes=-99999999", 206, 0, n - 1},
		{"bytes=5-99999999", 206, 5, n - 1},
		{fmt.Sprintf("bytes=%d-", n), 416, 0, 0},
		{"bytes=5-1", 416, 0, 0},
		{"bytes=0-1,5-6", 416, 0, 0},
		{"bytes=abc", 416, 0, 0},
		{"items=0-5", 200, 0, n - 1},
	}
	for _, tc := range tests {
		t.Run(tc.rng, func(t *testing.T) {
			resp := srv.Do(http.MethodGet, srv.EntryURL("default", key), nil, "Range", tc.rng)
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tc.wantStatus, body)
			}
			switch tc.wantStatus {
			case 416:
				errorCode(t, resp, body)
				if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", n) {
					t.Errorf("Content-Range = %q", cr)
				}
			case 206:
				if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes %d-%d/%d", tc.off, tc.end, n) {
					t.Errorf("Content-Range = %q", cr)
				}
				fallthrough
			default:
				if !bytes.Equal(body, all[tc.off:tc.end+1]) {
					t.Errorf("body is %d bytes, not bytes %d-%d", len(body), tc.off, tc.end)
				}
			}
		})
	}
}

func TestConcurrentPutsOneKey(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("concurrent")
	const writers = 8
	var wg sync.WaitGroup
	statuses := make(chan int, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := put(t, srv, "default", key, 21, 2<<20)
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[201] != 1 || count[200] != writers-1 {
		t.Errorf("statuses = %v, want one 201 and %d 200", count, writers-1)
	}
	if u := srv.Store.Usage(); u.Entries != 1 || u.Blobs != 1 {
		t.Errorf("usage = %+v", u)
	}
}

func TestErrorShape(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	tests := []struct {
		method, path string
		wantStatus   int
		wantCode     string
	}{
		{"GET", "/v1/default/entries/" + keyOf("missing"), 404, "not_found"},
		{"DELETE", "/v1/default/entries/" + keyOf("missing"), 404, "not_found"},
		{"GET", "/v1/default/entries/xyz", 400, "bad_key"},
		{"GET", "/v1/-bad/entries/" + keyOf("k"), 400, "bad_namespace"},
		{"GET", "/v1/" + strings.Repeat("a", 64) + "/entries/" + keyOf("k"), 400, "bad_namespace"},
		{"GET", "/no/such/route", 404, "route_not_found"},
		{"POST", "/v1/default/entries/" + keyOf("k"), 405, "method_not_allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp := srv.Do(tc.method, srv.URL+tc.path, nil)
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			if code := errorCode(t, resp, body); code != tc.wantCode {
				t.Errorf("code = %q, want %q; body %s", code, tc.wantCode, body)
			}
		})
	}
}

func TestHealthMetricsStats(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxBytes: 100 << 20})
	key := keyOf("m")
	put(t, srv, "default", key, 1, 1000)
	getDigest(t, srv, "default", key)
	getDigest(t, srv, "default", keyOf("miss"))
	for _, p := range []string{"/healthz", "/readyz"} {
		resp := srv.Do(http.MethodGet, srv.URL+p, nil)
		if b := apitest.ReadAll(t, resp); resp.StatusCode != 200 {
			t.Errorf("%s = %d %s", p, resp.StatusCode, b)
		}
	}
	for series, want := range map[string]float64{
		`cachesvc_http_requests_total{method="GET",route="/v1/:ns/entries/:key",status="200"}`: 1,
		`cachesvc_http_requests_total{method="GET",route="/v1/:ns/entries/:key",status="404"}`: 1,
		`cachesvc_http_requests_total{method="PUT",route="/v1/:ns/entries/:key",status="201"}`: 1,
		`cachesvc_lookups_by_route_total{result="hit",route="entries"}`:                        1,
		`cachesvc_lookups_by_route_total{result="miss",route="entries"}`:                       1,
		`cachesvc_lookups_total{backend="unknown",namespace="default",result="hit"}`:           1,
		`cachesvc_puts_total{result="created"}`:                                                1,
		`cachesvc_bytes_in_total`:                                                              1000,
		`cachesvc_bytes_out_total`:                                                             1000,
		`cachesvc_store_bytes`:                                                                 1000,
		`cachesvc_store_max_bytes`:                                                             100 << 20,
		`cachesvc_store_entries`:                                                               1,
		`cachesvc_evictions_total`:                                                             0,
		`cachesvc_integrity_failures_total`:                                                    0,
	} {
		if got := srv.Metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := srv.Metric(`cachesvc_store_disk_bytes`); got <= 0 {
		t.Errorf("cachesvc_store_disk_bytes = %v, want the store's files' size", got)
	}
	if got := srv.Metric(`cachesvc_http_request_duration_seconds_count{method="PUT",route="/v1/:ns/entries/:key"}`); got != 1 {
		t.Errorf("duration histogram count = %v", got)
	}
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/stats", nil)
	var st wire.StatsResponse
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &st); err != nil {
		t.Fatal(err)
	}
	if tot := st.Totals; tot.Hits != 1 || tot.Misses != 1 || tot.HitRate != 0.5 || tot.Writes != 1 || tot.BytesIn != 1000 || st.Store.Entries != 1 || st.Store.DiskBytes <= 0 {
		t.Errorf("stats = %+v", st)
	}
}

var _ hash.Hash = sha256.New()
