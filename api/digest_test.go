package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/wire"
)

func sigDigest(sig []byte) string {
	d := sha256.Sum256(sig)
	return hex.EncodeToString(d[:])
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// digestServer starts a server whose Keyer keeps its memo in the data
// directory; every (re)start opens a new Keyer on that file, as a process
// restart does.
func digestServer(t *testing.T, kcfg keying.Config, adjust func(*api.Config)) *apitest.Server {
	t.Helper()
	memo := filepath.Join(t.TempDir(), "signature-memo")
	var k *keying.Keyer
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) {
		if k != nil {
			if err := k.Close(context.Background()); err != nil {
				t.Errorf("close keyer: %v", err)
			}
		}
		cfg := kcfg
		cfg.MemoFile = memo
		k = keyingtest.Keyer(t, plugins.Config{}, cfg)
		kk := k
		t.Cleanup(func() { _ = kk.Close(context.Background()) })
		c.Keyer = k
		if adjust != nil {
			adjust(c)
		}
	}})
}

// digestLookup posts an empty body naming the signature by its digest.
func digestLookup(t *testing.T, s *apitest.Server, path, digest string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return post(t, s, path, nil, append([]string{wire.HeaderSignatureSHA256, digest}, headers...)...)
}

func TestDigestFirst(t *testing.T) {
	s := digestServer(t, keying.Config{}, nil)
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_digest-1"}`)
	d := sigDigest(sig)
	wantKey := keying.ComputeKey("passthrough@1.0.0", "passthrough", []byte("jax\x00jit_digest-1")).String()
	exe := bytes.Repeat([]byte("exe"), 1000)

	// Unknown before any full request: 428, on keys and lookup alike.
	for _, path := range []string{"/v1/default/keys", "/v1/default/lookup"} {
		resp, b := digestLookup(t, s, path, d)
		if resp.StatusCode != http.StatusPreconditionRequired || errCode(t, b) != "signature_required" {
			t.Fatalf("%s unknown digest: %d %s", path, resp.StatusCode, b)
		}
	}
	// A full lookup (a miss) teaches the memo.
	if resp, b := post(t, s, "/v1/default/lookup", sig, wire.HeaderSignatureSHA256, d); resp.StatusCode != 404 {
		t.Fatalf("full lookup: %d %s", resp.StatusCode, b)
	}
	// A known miss by digest: the same 404 with key, components, explanation.
	resp, b := digestLookup(t, s, "/v1/default/lookup", d, wire.HeaderBackend, "passthrough")
	var miss wire.LookupMiss
	if resp.StatusCode != 404 || json.Unmarshal(b, &miss) != nil || miss.Key != wantKey || miss.Components["kind"] != "jax" ||
		miss.Explanation.Reason == "" && miss.Explanation.Summary == "" {
		t.Fatalf("digest miss: %d %s", resp.StatusCode, b)
	}
	// keys by digest.
	resp, b = digestLookup(t, s, "/v1/default/keys", d)
	var kr wire.KeyResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &kr) != nil || kr.Key != wantKey || kr.Plugin != "passthrough@1.0.0" {
		t.Fatalf("digest keys: %d %s", resp.StatusCode, b)
	}
	// A hit by digest streams the entry.
	resp = s.Do(http.MethodPut, s.EntryURL("default", wantKey), bytes.NewReader(exe))
	apitest.ReadAll(t, resp)
	if resp.StatusCode != 201 {
		t.Fatalf("put: %d", resp.StatusCode)
	}
	resp, b = digestLookup(t, s, "/v1/default/lookup", d)
	if resp.StatusCode != 200 || !bytes.Equal(b, exe) || resp.Header.Get(wire.HeaderKey) != wantKey {
		t.Fatalf("digest hit: %d %d bytes", resp.StatusCode, len(b))
	}
	// Another backend never answers with this result.
	if resp, b := digestLookup(t, s, "/v1/default/lookup", d, wire.HeaderBackend, "xla"); resp.StatusCode != http.StatusPreconditionRequired {
		t.Fatalf("digest under another backend: %d %s", resp.StatusCode, b)
	}
	if got := s.Metric(`cachesvc_signature_digest_requests_total{outcome="known"}`); got != 3 {
		t.Errorf("known digest requests = %v, want 3", got)
	}

	// The memo survives a restart.
	s.Restart()
	resp, b = digestLookup(t, s, "/v1/default/lookup", d)
	if resp.StatusCode != 200 || !bytes.Equal(b, exe) {
		t.Fatalf("digest hit after a restart: %d %s", resp.StatusCode, b)
	}
}

func TestDigestFirstErrors(t *testing.T) {
	s := digestServer(t, keying.Config{MaxSignatureBytes: 1 << 20}, nil)
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_errors"}`)
	other := sigDigest([]byte("something else"))
	bomb := gzipped(t, append(append([]byte(`{"backend":"passthrough","kind":"jax","key":"k","pad":"`), bytes.Repeat([]byte("a"), 8<<20)...), `"}`...))
	gz := gzipped(t, sig)
	tests := []struct {
		name    string
		body    []byte
		headers []string
		status  int
		code    string
		text    string
	}{
		{"mismatch", sig, []string{wire.HeaderSignatureSHA256, other}, 400, "signature_digest_mismatch", "hash to " + sigDigest(sig)},
		{"bad digest header", nil, []string{wire.HeaderSignatureSHA256, "abc"}, 400, "bad_header", "64 hex characters"},
		{"gzip ok", gz, []string{"Content-Encoding", "gzip", wire.HeaderSignatureSHA256, sigDigest(sig)}, 404, "not_found", ""},
		{"gzip digest of the compressed bytes", gz, []string{"Content-Encoding", "gzip", wire.HeaderSignatureSHA256, sigDigest(gz)}, 400, "signature_digest_mismatch", "decompressed"},
		{"gzip corrupt", append(gz[:10:10], bytes.Repeat([]byte{0xff}, 40)...), []string{"Content-Encoding", "gzip"}, 400, "bad_gzip", "not a valid gzip stream"},
		{"gzip truncated", gz[:len(gz)-6], []string{"Content-Encoding", "gzip"}, 400, "bad_gzip", ""},
		{"gzip not gzip", sig, []string{"Content-Encoding", "gzip"}, 400, "bad_gzip", ""},
		{"gzip bomb", bomb, []string{"Content-Encoding", "gzip"}, 413, "signature_too_large", "decompresses to more than 1048576 bytes"},
		{"brotli", sig, []string{"Content-Encoding", "br"}, 415, "unsupported_encoding", "send gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, s, "/v1/default/lookup", tt.body, tt.headers...)
			var e errBody
			_ = json.Unmarshal(b, &e)
			if resp.StatusCode != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.text) {
				t.Fatalf("%d %s; want %d %s containing %q", resp.StatusCode, b, tt.status, tt.code, tt.text)
			}
		})
	}
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes on the wire; it must be under the limit to test the decompressed bound", len(bomb))
	}
	// A mismatch teaches the memo nothing.
	if resp, b := digestLookup(t, s, "/v1/default/lookup", other); resp.StatusCode != http.StatusPreconditionRequired {
		t.Fatalf("digest after a mismatch: %d %s", resp.StatusCode, b)
	}
}

// TestDigestFirstDisabled: with NoDigestLookups the header is ignored, as
// by a server that predates it (an empty body is a malformed signature).
func TestDigestFirstDisabled(t *testing.T) {
	s := digestServer(t, keying.Config{}, func(c *api.Config) { c.NoDigestLookups = true })
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_old"}`)
	if resp, b := post(t, s, "/v1/default/lookup", sig); resp.StatusCode != 404 {
		t.Fatalf("full lookup: %d %s", resp.StatusCode, b)
	}
	resp, b := digestLookup(t, s, "/v1/default/lookup", sigDigest(sig))
	if resp.StatusCode != 400 || errCode(t, b) != "malformed_signature" {
		t.Fatalf("digest on a server without digest lookups: %d %s", resp.StatusCode, b)
	}
}

// TestDigestFirstScopes: a digest known to the memo answers only in the
// namespaces the token may read.
func TestDigestFirstScopes(t *testing.T) {
	memo := filepath.Join(t.TempDir(), "signature-memo")
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{MemoFile: memo})
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	s := secureServer(t, nil, func(c *api.Config) { c.Keyer = k })
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_scoped"}`)
	d := sigDigest(sig)
	if resp, b := post(t, s, "/v1/default/lookup", sig, bearer(tokWriter)...); resp.StatusCode != 404 {
		t.Fatalf("writer's full lookup: %d %s", resp.StatusCode, b)
	}
	tests := []struct {
		name   string
		ns     string
		tok    []string
		status int
	}{
		{"anonymous in a private namespace", "default", nil, 401},
		{"writer outside its namespace", "team-a", bearer(tokWriter), 403},
		{"writer in its namespace", "default", bearer(tokWriter), 404},
		{"reader anywhere", "team-a", bearer(tokReader), 404},
		{"anonymous in public", "public", nil, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := digestLookup(t, s, "/v1/"+tt.ns+"/lookup", d, tt.tok...)
			if resp.StatusCode != tt.status {
				t.Fatalf("%d %s; want %d", resp.StatusCode, b, tt.status)
			}
		})
	}
}

// TestDigestFirstPluginReload: after a reload replaces a plugin, a digest
// learned under the old version is unknown (428), and the full signature
// gives the new version's key.
func TestDigestFirstPluginReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example plugin; skipped with -short")
	}
	dir := t.TempDir()
	v1 := filepath.Join(t.TempDir(), "cmdline.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", v1, "../plugins/examples/cmdline")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build example plugin: %v\n%s", err, out)
	}
	b1, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b1, []byte("0.1.0")); n != 1 {
		t.Fatalf("the example's version occurs %d times", n)
	}
	write := func(b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "cmdline.wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(b1)
	var k *keying.Keyer
	s := digestServer(t, keying.Config{}, func(c *api.Config) {
		k = c.Keyer
		if _, err := k.Host().LoadDir(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
	})
	sig, err := os.ReadFile("../plugins/examples/cmdline/testdata/gcc.json")
	if err != nil {
		t.Fatal(err)
	}
	d := sigDigest(sig)
	var before wire.KeyResponse
	if resp, b := post(t, s, "/v1/default/keys", sig); resp.StatusCode != 200 || json.Unmarshal(b, &before) != nil || before.Plugin != "cmdline@0.1.0" {
		t.Fatalf("keys: %d %s", resp.StatusCode, b)
	}
	if resp, b := digestLookup(t, s, "/v1/default/keys", d); resp.StatusCode != 200 {
		t.Fatalf("digest before the reload: %d %s", resp.StatusCode, b)
	}
	write(bytes.Replace(b1, []byte("0.1.0"), []byte("0.2.0"), 1))
	if _, err := k.Host().ReloadDir(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if resp, b := digestLookup(t, s, "/v1/default/keys", d); resp.StatusCode != http.StatusPreconditionRequired {
		t.Fatalf("digest after the reload: %d %s", resp.StatusCode, b)
	}
	var after wire.KeyResponse
	if resp, b := post(t, s, "/v1/default/keys", sig); resp.StatusCode != 200 || json.Unmarshal(b, &after) != nil ||
		after.Plugin != "cmdline@0.2.0" || after.Key == before.Key {
		t.Fatalf("keys after the reload: %d %s (before: %s)", resp.StatusCode, b, before.Key)
	}
	resp, b := digestLookup(t, s, "/v1/default/keys", d)
	var again wire.KeyResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &again) != nil || again.Key != after.Key {
		t.Fatalf("digest after relearning: %d %s", resp.StatusCode, b)
	}
}
