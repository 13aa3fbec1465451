package api_test

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/wire"
)

// Test tokens: their secrets are distinctive so that the log and metrics
// checks can search for them.
var (
	tokWriter = authtest.Token{Name: "ci-writer", Secret: "s3cr3t-writer-9f2c", Scopes: "default:write"}
	tokReader = authtest.Token{Name: "reader", Secret: "s3cr3t-reader-77aa", Scopes: "*:read"}
	tokAdmin  = authtest.Token{Name: "alice", Secret: "s3cr3t-admin-1b0e", Scopes: "*:admin"}
)

// secureServer starts a test server with the test tokens (anonymous read in
// namespace "public") and lets adjust change the API config.
func secureServer(t *testing.T, logs io.Writer, adjust func(*api.Config)) *apitest.Server {
	t.Helper()
	g, err := auth.NewGuard(authtest.WriteTokens(t, []authtest.Token{tokWriter, tokReader, tokAdmin}, "public"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := apitest.Options{API: func(c *api.Config) {
		c.Auth = g
		if adjust != nil {
			adjust(c)
		}
	}}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return apitest.Start(t, opts)
}

func bearer(tok authtest.Token) []string {
	if tok.Secret == "" {
		return nil
	}
	return []string{"Authorization", "Bearer " + tok.Secret}
}

func entryKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func errCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Error.Message == "" {
		t.Fatalf("error body %q has no message", body)
	}
	return e.Error.Code
}

func TestAuthStatuses(t *testing.T) {
	srv := secureServer(t, nil, nil)
	key := entryKey("auth")
	body := "compiled bytes"
	none := authtest.Token{}
	bad := authtest.Token{Secret: "not-a-known-token"}
	tests := []struct {
		name       string
		method     string
		path       string
		tok        authtest.Token
		headers    []string
		wantStatus int
		wantCode   string
	}{
		{"put without token", "PUT", "/v1/default/entries/" + key, none, nil, 401, "unauthorized"},
		{"put unknown token", "PUT", "/v1/default/entries/" + key, bad, nil, 401, "unauthorized"},
		{"put malformed header", "PUT", "/v1/default/entries/" + key, none, []string{"Authorization", "Basic " + tokWriter.Secret}, 401, "unauthorized"},
		{"put read-only token", "PUT", "/v1/default/entries/" + key, tokReader, nil, 403, "forbidden"},
		{"put writer other ns", "PUT", "/v1/other/entries/" + key, tokWriter, nil, 403, "forbidden"},
		{"put writer", "PUT", "/v1/default/entries/" + key, tokWriter, nil, 201, ""},
		{"get without token", "GET", "/v1/default/entries/" + key, none, nil, 401, "unauthorized"},
		{"get upper-case path without token", "GET", "/V1/default/ENTRIES/" + key, none, nil, 401, "unauthorized"},
		{"get trailing slash without token", "GET", "/v1/default/entries/" + key + "/", none, nil, 401, "unauthorized"},
		{"get reader", "GET", "/v1/default/entries/" + key, tokReader, nil, 200, ""},
		{"get writer", "GET", "/v1/default/entries/" + key, tokWriter, nil, 200, ""},
		{"get anonymous public", "GET", "/v1/public/entries/" + key, none, nil, 404, "not_found"},
		{"put anonymous public", "PUT", "/v1/public/entries/" + key, none, nil, 401, "unauthorized"},
		{"delete writer", "DELETE", "/v1/default/entries/" + key, tokWriter, nil, 403, "forbidden"},
		{"stats reader", "GET", "/v1/stats", tokReader, nil, 403, "forbidden"},
		{"stats admin", "GET", "/v1/stats", tokAdmin, nil, 200, ""},
		{"metrics anonymous", "GET", "/metrics", none, nil, 401, "unauthorized"},
		{"metrics reader", "GET", "/metrics", tokReader, nil, 200, ""},
		{"healthz anonymous", "GET", "/healthz", none, nil, 200, ""},
		{"delete admin", "DELETE", "/v1/default/entries/" + key, tokAdmin, nil, 204, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rb io.Reader
			h := append(bearer(tc.tok), tc.headers...)
			if tc.method == "PUT" {
				rb = strings.NewReader(body)
			}
			resp := srv.Do(tc.method, srv.URL+tc.path, rb, h...)
			b := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %.2000s", resp.StatusCode, tc.wantStatus, b)
			}
			if tc.wantCode != "" {
				if got := errCode(t, b); got != tc.wantCode {
					t.Fatalf("code %q, want %q", got, tc.wantCode)
				}
			}
			wa := resp.Header.Get("WWW-Authenticate")
			if (tc.wantStatus == 401) != strings.HasPrefix(wa, "Bearer realm=") {
				t.Fatalf("WWW-Authenticate %q with status %d", wa, resp.StatusCode)
			}
		})
	}
}

func TestTokensNeverLogged(t *testing.T) {
	var logs syncBuffer
	srv := secureServer(t, &logs, nil)
	key := entryKey("logs")
	for _, tok := range []authtest.Token{tokWriter, tokReader, tokAdmin, {Secret: "s3cr3t-unknown-4242"}} {
		apitest.ReadAll(t, srv.Do("PUT", srv.EntryURL("default", key), strings.NewReader("x"), bearer(tok)...))
		apitest.ReadAll(t, srv.Do("GET", srv.EntryURL("default", key), nil, bearer(tok)...))
		apitest.ReadAll(t, srv.Do("GET", srv.URL+"/v1/stats", nil, bearer(tok)...))
	}
	metrics := string(apitest.ReadAll(t, srv.Do("GET", srv.URL+"/metrics", nil, bearer(tokAdmin)...)))
	if !strings.Contains(logs.String(), "request") {
		t.Fatal("no request logs captured")
	}
	for _, secret := range []string{tokWriter.Secret, tokReader.Secret, tokAdmin.Secret, "s3cr3t-unknown-4242", "s3cr3t"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain %q", secret)
		}
		if strings.Contains(metrics, secret) {
			t.Errorf("metrics contain %q", secret)
		}
	}
	if !strings.Contains(metrics, `cachesvc_auth_failures_total{reason="forbidden"}`) {
		t.Error("metrics lack the auth failure counter")
	}
}

func TestRateLimit(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) {
		// One request per 100 s after a burst of 2: nothing refills while
		// the test runs, however slow the machine.
		c.Limits.RequestsPerSecond = 0.01
		c.Limits.Burst = 2
	})
	url := srv.EntryURL("default", entryKey("rate"))
	for i := 0; i < 2; i++ {
		if resp := srv.Do("GET", url, nil, bearer(tokReader)...); resp.StatusCode != 404 {
			t.Fatalf("request %d in burst: %d", i, resp.StatusCode)
		}
	}
	resp := srv.Do("GET", url, nil, bearer(tokReader)...)
	b := apitest.ReadAll(t, resp)
	if resp.StatusCode != 429 || errCode(t, b) != "rate_limited" {
		t.Fatalf("3rd request: %d %s", resp.StatusCode, b)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 100 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	// Another token has its own bucket.
	if resp := srv.Do("GET", url, nil, bearer(tokWriter)...); resp.StatusCode != 404 {
		t.Fatalf("other token: %d", resp.StatusCode)
	}
	// Requests with bad tokens count against the client address.
	for i := 0; i < 2; i++ {
		if resp := srv.Do("GET", url, nil, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
			t.Fatalf("bad token %d: %d", i, resp.StatusCode)
		}
	}
	if resp := srv.Do("GET", url, nil, "Authorization", "Bearer wrong"); resp.StatusCode != 429 {
		t.Fatalf("bad-token flood: %d, want 429", resp.StatusCode)
	}
	// Health checks are not limited.
	if resp := srv.Do("GET", srv.URL+"/healthz", nil); resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

func TestConcurrentUploadLimit(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) { c.Limits.MaxConcurrentUploads = 1 })
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	first := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("PUT", srv.EntryURL("default", entryKey("slow")), pr)
		req.Header.Set("Authorization", "Bearer "+tokWriter.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(first)
			return
		}
		first <- resp
	}()
	pw.Write([]byte("first part "))
	for deadline := time.Now().Add(10 * time.Second); uploadsInProgress(t, srv) != 1; {
		if time.Now().After(deadline) {
			t.Fatal("first upload never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp := srv.Do("PUT", srv.EntryURL("default", entryKey("second")), strings.NewReader("second"), bearer(tokWriter)...)
	b := apitest.ReadAll(t, resp)
	if resp.StatusCode != 503 || errCode(t, b) != "too_many_uploads" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second upload: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// Reads are not uploads.
	if resp := srv.Do("GET", srv.EntryURL("default", entryKey("x")), nil, bearer(tokReader)...); resp.StatusCode != 404 {
		t.Fatalf("GET during upload: %d", resp.StatusCode)
	}
	pw.Write([]byte("and the rest"))
	pw.Close()
	if r := <-first; r == nil || r.StatusCode != 201 {
		t.Fatalf("first upload: %v", r)
	}
	resp = srv.Do("PUT", srv.EntryURL("default", entryKey("second")), strings.NewReader("second"), bearer(tokWriter)...)
	if resp.StatusCode != 201 {
		t.Fatalf("upload after the slot freed: %d", resp.StatusCode)
	}
}

// TestHeaderSizeLimit checks that a header block (the URL included) past
// Limits.MaxHeaderBytes is answered 431 with a message naming the limit and
// what to do, and that one under it is served.
func TestHeaderSizeLimit(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) { c.Limits.MaxHeaderBytes = 4096 })
	tests := []struct {
		name     string
		target   string
		headers  []string
		want     int
		wantBody []string
	}{
		// The message names the limit and the flag that raises it.
		{name: "8 KiB header", target: "/healthz", headers: []string{"X-Padding", strings.Repeat("a", 8192)},
			want: http.StatusRequestHeaderFieldsTooLarge, wantBody: []string{"4096 bytes", "--max-header-size"}},
		// A long URL counts toward the same limit.
		{name: "8 KiB URL", target: "/v1/" + strings.Repeat("n", 8192) + "/stats", headers: bearer(tokReader),
			want: http.StatusRequestHeaderFieldsTooLarge, wantBody: []string{"shorten the URL"}},
		{name: "1 KiB header", target: "/healthz", headers: []string{"X-Padding", strings.Repeat("a", 1024)},
			want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := getOnItsOwnConn(t, srv, tc.target, tc.headers...)
			if status != tc.want {
				t.Fatalf("%d %s, want %d", status, body, tc.want)
			}
			for _, w := range tc.wantBody {
				if !strings.Contains(string(body), w) {
					t.Errorf("body %s lacks %q", body, w)
				}
			}
		})
	}
}

// closedWithin reports whether the server ends c within d while trickle
// keeps sending one byte of more every 100 ms.
func closedWithin(c net.Conn, d time.Duration, more []byte) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, c) // returns when the server closes
	}()
	deadline := time.After(d)
	for i := 0; ; i++ {
		select {
		case <-done:
			return true
		case <-deadline:
			return false
		case <-time.After(100 * time.Millisecond):
			c.Write(more[i%len(more) : i%len(more)+1])
		}
	}
}

func TestSlowLoris(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) {
		c.Limits.ReadTimeout = 300 * time.Millisecond
		c.Limits.MinTransferRate = 64 << 10
	})
	t.Run("headers", func(t *testing.T) {
		c := rawConn(t, srv)
		c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
		if !closedWithin(c, 15*time.Second, []byte("X-Slow: aaaaaaaa\r\n")) {
			t.Fatal("a client trickling headers held its connection for 15 s")
		}
	})
	t.Run("body", func(t *testing.T) {
		c := rawConn(t, srv)
		fmt.Fprintf(c, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000000\r\n\r\n", entryKey("loris"), tokWriter.Secret)
		if !closedWithin(c, 15*time.Second, []byte("x")) {
			t.Fatal("a client trickling a body held its connection for 15 s")
		}
		if uploadsInProgress(t, srv) != 0 {
			t.Fatal("the cut-off upload still holds a slot")
		}
		resp := srv.Do("HEAD", srv.EntryURL("default", entryKey("loris")), nil, bearer(tokReader)...)
		if resp.StatusCode != 404 {
			t.Fatalf("partial upload visible: %d", resp.StatusCode)
		}
	})
}

// pacedReader yields size bytes, chunk bytes every every.
type pacedReader struct {
	left, chunk, inChunk int
	every                time.Duration
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if p.inChunk == 0 {
		time.Sleep(p.every)
		p.inChunk = p.chunk
	}
	n := min(len(b), p.inChunk, p.left)
	clear(b[:n])
	p.left -= n
	p.inChunk -= n
	return n, nil
}

func TestLongUploadAtGoodRate(t *testing.T) {
	// The upload lasts about 4 s, four times ReadTimeout, at about 8 MiB/s,
	// eight times the minimum rate: it must not be cut.
	srv := secureServer(t, nil, func(c *api.Config) {
		c.Limits.ReadTimeout = time.Second
		c.Limits.MinTransferRate = 1 << 20
	})
	const size = 32 << 20
	req, _ := http.NewRequest("PUT", srv.EntryURL("default", entryKey("long")), &pacedReader{left: size, chunk: 256 << 10, every: 31 * time.Millisecond})
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+tokWriter.Secret)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload after %v: %v", time.Since(start), err)
	}
	b := apitest.ReadAll(t, resp)
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d < time.Second {
		t.Logf("upload took only %v; the test proves less than intended", d)
	}
}

func TestTLS(t *testing.T) {
	pki := authtest.NewPKI(t)
	tests := []struct {
		name     string
		clientCA string
		withCert bool
		wantOK   bool
	}{
		{"tls", "", false, true},
		{"mtls with client cert", pki.CACert, true, true},
		{"mtls without client cert", pki.CACert, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tlsCfg, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: tc.clientCA}.Config()
			if err != nil {
				t.Fatal(err)
			}
			srv := secureServer(t, nil, func(c *api.Config) { c.TLS = tlsCfg })
			base := strings.Replace(srv.URL, "http://", "https://", 1)
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(t, tc.withCert)}}
			resp, err := hc.Get(base + "/v1/default/entries/" + entryKey("tls"))
			if !tc.wantOK {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("request without a client certificate got %d", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Fatalf("over TLS without token: %d, want 401", resp.StatusCode)
			}
			// Plain HTTP to the TLS port fails.
			if resp, err := http.Get(srv.URL + "/healthz"); err == nil && resp.StatusCode == 200 {
				t.Fatal("plain HTTP served on the TLS port")
			}
			// The client must verify the server: an empty root pool fails.
			hc2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
			if _, err := hc2.Get(base + "/healthz"); err == nil {
				t.Fatal("a client not trusting the test CA connected")
			}
		})
	}
}

// uploadsInProgress reads the cachesvc_uploads_in_progress gauge.
func uploadsInProgress(t *testing.T, srv *apitest.Server) int {
	t.Helper()
	body := apitest.ReadAll(t, srv.Do("GET", srv.URL+"/metrics", nil, bearer(tokAdmin)...))
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "cachesvc_uploads_in_progress "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("gauge %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("no cachesvc_uploads_in_progress in /metrics")
	return 0
}

// syncBuffer is a bytes.Buffer safe for concurrent writes by the logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBrokenConnectionsDoNotCrash sends what fasthttp itself rejects before
// any route runs (plain HTTP to a TLS port, a connection reset in the
// middle of its headers): the server must answer or drop it and keep
// serving.
func TestBrokenConnectionsDoNotCrash(t *testing.T) {
	pki := authtest.NewPKI(t)
	tlsCfg, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, withTLS := range []bool{false, true} {
		srv := secureServer(t, nil, func(c *api.Config) {
			if withTLS {
				c.TLS = tlsCfg
			}
		})
		for i := 0; i < 3; i++ {
			c := rawConn(t, srv)
			c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Half: "))
			c.(*net.TCPConn).SetLinger(0) // reset, not a clean close
			c.Close()
			c = rawConn(t, srv)
			c.Write([]byte("\x16\x03\x01garbage that is neither TLS nor HTTP\r\n\r\n"))
			io.Copy(io.Discard, io.LimitReader(c, 1<<10))
			c.Close()
		}
		base := srv.URL
		hc := http.DefaultClient
		if withTLS {
			base = strings.Replace(base, "http://", "https://", 1)
			hc = &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(t, false)}}
		}
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("tls=%v: server gone after broken connections: %v", withTLS, err)
		}
		resp.Body.Close()
	}
}

func TestProvenanceAndSignature(t *testing.T) {
	signer := auth.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	srv := secureServer(t, nil, func(c *api.Config) { c.Signer = signer })
	key := entryKey("provenance")
	content := "the executable"
	before := time.Now().Add(-time.Second)
	resp := srv.Do("PUT", srv.EntryURL("default", key), strings.NewReader(content),
		append(bearer(tokWriter), "X-Cachesvc-Run", "run-42")...)
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
		t.Fatalf("put: %d %s", resp.StatusCode, b)
	}
	for _, method := range []string{"GET", "HEAD"} {
		resp := srv.Do(method, srv.EntryURL("default", key), nil, bearer(tokReader)...)
		apitest.ReadAll(t, resp)
		h := resp.Header
		if h.Get(wire.HeaderWriter) != tokWriter.Name || h.Get(wire.HeaderRun) != "run-42" {
			t.Fatalf("%s: writer %q run %q", method, h.Get(wire.HeaderWriter), h.Get(wire.HeaderRun))
		}
		created, err := time.Parse(time.RFC3339Nano, h.Get(wire.HeaderCreated))
		if err != nil || created.Before(before) || created.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s: created %q: %v", method, h.Get(wire.HeaderCreated), err)
		}
		k, _ := hex.DecodeString(key)
		sum := sha256.Sum256([]byte(content))
		var sk [32]byte
		copy(sk[:], k)
		if !auth.Verify(signer.PublicKey(), sk, sum, h.Get(wire.HeaderSignature)) {
			t.Fatalf("%s: signature %q does not verify", method, h.Get(wire.HeaderSignature))
		}
		if auth.Verify(signer.PublicKey(), sk, sha256.Sum256([]byte("poison")), h.Get(wire.HeaderSignature)) {
			t.Fatalf("%s: signature verifies other content", method)
		}
	}
	// Batch members carry the same signature as a PAX record.
	resp = srv.Do("POST", srv.URL+"/v1/default/batch", strings.NewReader(`{"keys":["`+key+`"]}`), bearer(tokReader)...)
	defer resp.Body.Close()
	hdr, err := tar.NewReader(resp.Body).Next()
	if err != nil || hdr.Name != key {
		t.Fatalf("batch: %v %v", hdr, err)
	}
	k, _ := hex.DecodeString(key)
	if !auth.Verify(signer.PublicKey(), [32]byte(k), sha256.Sum256([]byte(content)), hdr.PAXRecords[wire.PAXSignature]) {
		t.Fatalf("batch member signature %q does not verify", hdr.PAXRecords[wire.PAXSignature])
	}
}
