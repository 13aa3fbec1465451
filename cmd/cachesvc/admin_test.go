package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Tokens of the admin tests' servers.
const (
	adminSecret  = "admin-test-secret-ops-0123456789"
	aliceSecret  = "admin-test-secret-alice-0123456789"
	bobSecret    = "admin-test-secret-bob-0123456789"
	viewerSecret = "admin-test-secret-viewer-0123456789"
)

// adminServer is a real server over real Badger with tokens ops (admin on
// every namespace), alice and bob (write in team), viewer (read in team),
// signing entries with signer when it is not nil.
func adminServer(t *testing.T, signer *auth.Signer) *apitest.Server {
	t.Helper()
	tokens := authtest.WriteTokens(t, []authtest.Token{
		{Name: "ops", Secret: adminSecret, Scopes: "*:admin"},
		{Name: "alice", Secret: aliceSecret, Scopes: "team:write"},
		{Name: "bob", Secret: bobSecret, Scopes: "team:write"},
		{Name: "viewer", Secret: viewerSecret, Scopes: "team:read"},
	}, "")
	g, err := auth.NewGuard(tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Auth = g; c.Signer = signer }})
}

// seeded is one entry the tests store, with what they expect of it.
type seeded struct {
	key  string
	body []byte
}

// putHTTP stores body under key through PUT as the token's writer.
func putHTTP(t *testing.T, srv *apitest.Server, token, ns, run, backend string, body []byte) seeded {
	t.Helper()
	sum := sha256.Sum256(body)
	key := hex.EncodeToString(sha256Of(append([]byte("key:"), body...)))
	headers := []string{"Authorization", "Bearer " + token, wire.HeaderContentSHA256, hex.EncodeToString(sum[:]),
		wire.HeaderCompileSeconds, "12.5", wire.HeaderName, "jit_" + key[:6]}
	if run != "" {
		headers = append(headers, wire.HeaderRun, run)
	}
	if backend != "" {
		headers = append(headers, wire.HeaderBackend, backend)
	}
	resp := srv.Do(http.MethodPut, srv.URL+"/v1/"+ns+"/entries/"+key, bytes.NewReader(body), headers...)
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT %s: %d %s", key, resp.StatusCode, b)
	}
	return seeded{key: key, body: body}
}

// putStore stores body directly in the server's Badger store, for the
// metadata PUT cannot set (labels, a creation time in the past).
func putStore(t *testing.T, srv *apitest.Server, ns string, body []byte, opts store.PutOptions) seeded {
	t.Helper()
	k := cachekey.Key(sha256.Sum256(append([]byte("store:"), body...)))
	opts.Size = int64(len(body))
	if _, err := srv.Store.Put(context.Background(), ns, k, bytes.NewReader(body), opts); err != nil {
		t.Fatal(err)
	}
	return seeded{key: k.String(), body: body}
}

// pattern is n deterministic bytes.
func pattern(seed string, n int) []byte {
	b := make([]byte, 0, n+32)
	for h := sha256.Sum256([]byte(seed)); len(b) < n; h = sha256.Sum256(h[:]) {
		b = append(b, h[:]...)
	}
	return b[:n]
}

// fixture is a server holding a namespace "team" of several entries, and
// one entry in "other".
type fixture struct {
	srv                         *apitest.Server
	a1, a2, b1, old1, old2, big seeded
	other                       seeded
}

// all returns the keys of team.
func (f *fixture) all() []string {
	return sortedKeys(f.a1, f.a2, f.b1, f.old1, f.old2, f.big)
}

func sortedKeys(es ...seeded) []string {
	var ks []string
	for _, e := range es {
		ks = append(ks, e.key)
	}
	slices.Sort(ks)
	return ks
}

func newFixture(t *testing.T, signer *auth.Signer) *fixture {
	t.Helper()
	srv := adminServer(t, signer)
	f := &fixture{srv: srv}
	f.a1 = putHTTP(t, srv, aliceSecret, "team", "run-1", "xla", []byte("alice one"))
	f.a2 = putHTTP(t, srv, aliceSecret, "team", "run-2", "xla", pattern("a2", 5000))
	f.b1 = putHTTP(t, srv, bobSecret, "team", "run-1", "pt2", pattern("b1", 70_000))
	past := time.Now().Add(-72 * time.Hour).UTC()
	f.old1 = putStore(t, srv, "team", pattern("old1", 300), store.PutOptions{Writer: "carol", Run: "run-0", Backend: "xla",
		Name: "jit_old", CompileSeconds: 40, Created: past, Labels: map[string]string{"team": "infra", "jaxlib": "0.4.30"},
		Components: map[string]string{"module": "sha256:abc", "flags": "sha256:def"}})
	f.old2 = putStore(t, srv, "team", pattern("old2", 10), store.PutOptions{Writer: "carol", Created: past.Add(time.Hour)})
	// Over two of the store's 1 MiB chunks.
	f.big = putStore(t, srv, "team", pattern("big", 2<<20+12345), store.PutOptions{Writer: "bob", Run: "run-3", Backend: "pt2",
		Labels: map[string]string{"size": "big"}, Components: map[string]string{"graph": "sha256:123"}})
	f.other = putStore(t, srv, "other", []byte("another namespace"), store.PutOptions{Writer: "dave"})
	return f
}

func mustKey(t *testing.T, s string) cachekey.Key {
	t.Helper()
	k, err := cachekey.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// admin runs `cachesvc admin ARGS` against url with token.
func admin(t *testing.T, url, token string, args ...string) (int, string, string) {
	t.Helper()
	all := append([]string{"admin"}, args...)
	all = append(all, "--server", url)
	if token != "" {
		all = append(all, "--token", token)
	}
	return runCmd(t, all...)
}

// jsonKeys parses NDJSON entries and returns their keys, sorted.
func jsonKeys(t *testing.T, out string) []string {
	t.Helper()
	var ks []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e client.EntryInfo
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not an entry line %q: %v", line, err)
		}
		ks = append(ks, e.Key)
	}
	slices.Sort(ks)
	return ks
}

// TestAdminList lists with each filter and checks the exact set.
func TestAdminList(t *testing.T) {
	f := newFixture(t, nil)
	// Make every entry but a1 idle for over a second.
	time.Sleep(1100 * time.Millisecond)
	resp := f.srv.Do(http.MethodGet, f.srv.URL+"/v1/team/entries/"+f.a1.key, nil, "Authorization", "Bearer "+viewerSecret)
	apitest.ReadAll(t, resp)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"all", nil, f.all()},
		{"writer", []string{"--writer", "alice"}, sortedKeys(f.a1, f.a2)},
		{"writer from PutOptions", []string{"--writer", "carol"}, sortedKeys(f.old1, f.old2)},
		{"run", []string{"--run", "run-1"}, sortedKeys(f.a1, f.b1)},
		{"backend", []string{"--backend", "pt2"}, sortedKeys(f.b1, f.big)},
		{"older-than days", []string{"--older-than", "2d"}, sortedKeys(f.old1, f.old2)},
		{"older-than hours", []string{"--older-than", "71h30m"}, sortedKeys(f.old1)},
		{"idle-for", []string{"--idle-for", "1s"}, sortedKeys(f.a2, f.b1, f.old1, f.old2, f.big)},
		{"min-size", []string{"--min-size", "1MiB"}, sortedKeys(f.big)},
		{"max-size", []string{"--max-size", "300"}, sortedKeys(f.a1, f.old1, f.old2)},
		{"size range", []string{"--min-size", "1000", "--max-size", "100KB"}, sortedKeys(f.a2, f.b1)},
		{"combined", []string{"--writer", "bob", "--backend", "pt2", "--run", "run-3"}, sortedKeys(f.big)},
		{"none match", []string{"--writer", "nobody"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := admin(t, f.srv.URL, adminSecret, append([]string{"list", "--ns", "team", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := jsonKeys(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
			if !strings.Contains(errOut, fmt.Sprintf("%d entries", len(tc.want))) {
				t.Errorf("summary %q does not count %d entries", errOut, len(tc.want))
			}
		})
	}
	t.Run("table", func(t *testing.T) {
		code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--writer", "carol")
		if code != 0 || !strings.Contains(out, "KEY") || !strings.Contains(out, f.old1.key) || !strings.Contains(out, "jit_old") {
			t.Errorf("exit %d, table:\n%s", code, out)
		}
	})
	t.Run("all namespaces", func(t *testing.T) {
		code, out, errOut := admin(t, f.srv.URL, adminSecret, "list", "--all-namespaces", "--json")
		want := append(f.all(), f.other.key)
		slices.Sort(want)
		if got := jsonKeys(t, out); code != 0 || !slices.Equal(got, want) {
			t.Errorf("exit %d %s: got %v, want %v", code, errOut, got, want)
		}
	})
}

// TestAdminListPages pages through more entries than one page holds.
func TestAdminListPages(t *testing.T) {
	srv := adminServer(t, nil)
	var want []string
	for i := 0; i < wire.MaxListLimit+7; i++ {
		want = append(want, putStore(t, srv, "team", []byte(fmt.Sprint("entry ", i)), store.PutOptions{Writer: "w"}).key)
	}
	slices.Sort(want)
	code, out, errOut := admin(t, srv.URL, adminSecret, "list", "--ns", "team", "--json")
	if got := jsonKeys(t, out); code != 0 || !slices.Equal(got, want) {
		t.Fatalf("exit %d %s: got %d keys, want %d", code, errOut, len(got), len(want))
	}
	// A page of the raw API says where to go on.
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/team/entries?limit=5", nil, "Authorization", "Bearer "+adminSecret)
	var page wire.EntryList
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &page); err != nil || len(page.Entries) != 5 || page.Next != want[4] {
		t.Errorf("page: %v, %d entries, next %q (want %q)", err, len(page.Entries), page.Next, want[4])
	}
}

// TestAdminDelete checks that a dry run deletes nothing and prints exactly
// the set that the real delete then removes.
func TestAdminDelete(t *testing.T) {
	f := newFixture(t, nil)
	code, dry, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--ns", "team", "--writer", "bob", "--dry-run", "--json")
	if code != 0 || !strings.Contains(errOut, "would delete 2 entries") {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	want := sortedKeys(f.b1, f.big)
	if got := jsonKeys(t, dry); !slices.Equal(got, want) {
		t.Fatalf("dry run listed %v, want %v", got, want)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--json"); code != 0 || !slices.Equal(jsonKeys(t, out), f.all()) {
		t.Fatalf("the dry run deleted something: %v", jsonKeys(t, out))
	}
	code, real, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--ns", "team", "--writer", "bob", "--yes", "--json")
	if code != 0 || !strings.Contains(errOut, "deleted 2 entries") {
		t.Fatalf("delete: exit %d: %s", code, errOut)
	}
	if got := jsonKeys(t, real); !slices.Equal(got, jsonKeys(t, dry)) {
		t.Errorf("delete removed %v, the dry run said %v", got, jsonKeys(t, dry))
	}
	for _, e := range []seeded{f.a1, f.a2, f.b1, f.old1, f.old2, f.big} {
		_, err := f.srv.Store.Stat(context.Background(), "team", mustKey(t, e.key))
		gone := slices.Contains(want, e.key)
		if gone != (err != nil) {
			t.Errorf("%s: stat err %v, want gone=%v", e.key, err, gone)
		}
	}
	if _, err := f.srv.Store.Stat(context.Background(), "other", mustKey(t, f.other.key)); err != nil {
		t.Errorf("another namespace's entry was touched: %v", err)
	}

	refusals := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no filter", []string{"delete", "--ns", "team", "--yes"}, 2, "give at least one filter"},
		{"all with filter", []string{"delete", "--ns", "team", "--all", "--writer", "x", "--yes"}, 2, "without filters"},
		{"no --yes off a terminal", []string{"delete", "--ns", "team", "--writer", "alice"}, 2, "needs --yes"},
		{"bad age", []string{"delete", "--ns", "team", "--older-than", "soon", "--yes"}, 2, "--older-than"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := admin(t, f.srv.URL, adminSecret, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q", code, tc.code, errOut, tc.want)
			}
		})
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--json"); code != 0 || len(jsonKeys(t, out)) != 4 {
		t.Errorf("a refused delete removed entries: %v", jsonKeys(t, out))
	}
	// Filters never come from the environment.
	os.Setenv("CACHESVC_WRITER", "alice")
	defer os.Unsetenv("CACHESVC_WRITER")
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--ns", "team", "--yes"); code != 2 || !strings.Contains(errOut, "give at least one filter") {
		t.Errorf("CACHESVC_WRITER acted as a filter: exit %d %s", code, errOut)
	}
}

// TestAdminShow shows an entry's provenance and checks its signature.
func TestAdminShow(t *testing.T) {
	dir := t.TempDir()
	signer := newSigner(t, filepath.Join(dir, "sign.key"))
	f := newFixture(t, signer)
	code, out, errOut := admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--ns", "team", "--verify-key", filepath.Join(dir, "sign.key.pub"))
	for _, want := range []string{"writer:          carol", "run:             run-0", "backend:         xla", "jaxlib=0.4.30, team=infra",
		"flags=sha256:def, module=sha256:abc", "valid (verified with", "compile seconds: 40", hex.EncodeToString(sha256Of(f.old1.body))} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	newSigner(t, filepath.Join(dir, "other.key"))
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--ns", "team", "--verify-key", filepath.Join(dir, "other.key.pub"))
	if code != 1 || !strings.Contains(out, "INVALID") || !strings.Contains(errOut, "does not verify") {
		t.Errorf("wrong key: exit %d\n%s\n%s", code, out, errOut)
	}
	missing := strings.Repeat("0", 64)
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "show", missing, "--ns", "team"); code != 1 || !strings.Contains(errOut, "No entry with key "+missing) {
		t.Errorf("missing entry: exit %d %s", code, errOut)
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "show", "xyz"); code != 2 || !strings.Contains(errOut, "KEY:") {
		t.Errorf("bad key: exit %d %s", code, errOut)
	}
}

// newSigner writes a key pair at path and loads its private half.
func newSigner(t *testing.T, path string) *auth.Signer {
	t.Helper()
	if _, err := auth.WriteKeyPair(path); err != nil {
		t.Fatal(err)
	}
	s, err := auth.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serverEntry is what a server serves for an entry: its bytes' SHA-256,
// its provenance and its signature header.
func serverEntry(t *testing.T, srv *apitest.Server, ns, key string) (string, client.EntryInfo, string) {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/"+ns+"/entries/"+key, nil, "Authorization", "Bearer "+adminSecret)
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/%s: %d %s", ns, key, resp.StatusCode, body)
	}
	resp = srv.Do(http.MethodGet, srv.URL+"/v1/"+ns+"/entries/"+key+"/meta", nil, "Authorization", "Bearer "+adminSecret)
	var e client.EntryInfo
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &e); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sha256Of(body)), e, resp.Header.Get(wire.HeaderSignature) + e.Signature
}

// sameProvenance compares what an import must keep.
func sameProvenance(a, b client.EntryInfo) bool {
	return a.Key == b.Key && a.Size == b.Size && a.SHA256 == b.SHA256 && a.Created.Equal(b.Created) &&
		a.Writer == b.Writer && a.Run == b.Run && a.Backend == b.Backend && a.Name == b.Name &&
		a.CompileSeconds == b.CompileSeconds && fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) &&
		fmt.Sprint(a.Components) == fmt.Sprint(b.Components) && a.Signature == b.Signature
}

// TestAdminExportImport exports a namespace, imports it into an empty
// server (identical bytes, metadata and signatures), imports it again
// (everything skipped), and finishes an import cut short by a truncated
// file.
func TestAdminExportImport(t *testing.T) {
	dir := t.TempDir()
	signer := newSigner(t, filepath.Join(dir, "sign.key"))
	f := newFixture(t, signer)
	_, before, _ := serverEntry(t, f.srv, "team", f.old1.key)
	tarPath := filepath.Join(dir, "team.tar")
	code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--ns", "team", "-o", tarPath)
	if code != 0 || !strings.Contains(errOut, "exported 6 entries") {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	if _, after, _ := serverEntry(t, f.srv, "team", f.old1.key); after.Hits != before.Hits+1 {
		// serverEntry's own GET is the one hit; the export counted none.
		t.Errorf("hits %d → %d: the export counted as an access", before.Hits, after.Hits)
	}
	if m, _ := filepath.Glob(tarPath + ".partial-*"); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}

	// The destination shares the signing key, as a fleet does.
	dst := adminServer(t, signer)
	code, out, errOut := admin(t, dst.URL, adminSecret, "import", tarPath, "--ns", "team", "--verify-key", filepath.Join(dir, "sign.key.pub"))
	if code != 0 || !strings.Contains(out, "imported 6 entries") || !strings.Contains(out, "skipped 0") {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, e := range []seeded{f.a1, f.a2, f.b1, f.old1, f.old2, f.big} {
		wantSum, wantMeta, wantSig := serverEntry(t, f.srv, "team", e.key)
		gotSum, gotMeta, gotSig := serverEntry(t, dst, "team", e.key)
		if gotSum != wantSum || gotSum != hex.EncodeToString(sha256Of(e.body)) {
			t.Errorf("%s: bytes sha256 %s, source %s", e.key, gotSum, wantSum)
		}
		if !sameProvenance(gotMeta, wantMeta) || gotSig != wantSig || gotSig == "" {
			t.Errorf("%s: provenance differs:\n got %+v\nwant %+v", e.key, gotMeta, wantMeta)
		}
	}
	if code, out, _ := admin(t, dst.URL, adminSecret, "list", "--all-namespaces", "--json"); code != 0 || !slices.Equal(jsonKeys(t, out), f.all()) {
		t.Errorf("destination holds %v, want %v", jsonKeys(t, out), f.all())
	}

	// Again: everything is present, nothing is sent.
	code, out, errOut = admin(t, dst.URL, adminSecret, "import", tarPath, "--ns", "team")
	if code != 0 || !strings.Contains(out, "imported 0 entries") || !strings.Contains(out, "skipped 6 already present") {
		t.Errorf("second import: exit %d\n%s\n%s", code, out, errOut)
	}

	// A file cut inside the big entry: the entries before it commit, the
	// big one not at all; the full file then finishes the job.
	off := memberOffset(t, tarPath, f.big.key)
	cut := filepath.Join(dir, "cut.tar")
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, data[:off+(1<<20)+777], 0o644); err != nil {
		t.Fatal(err)
	}
	dst2 := adminServer(t, nil)
	code, out, errOut = admin(t, dst2.URL, adminSecret, "import", cut, "--ns", "team")
	if code != 1 || !strings.Contains(errOut, "cut short inside member "+f.big.key) || !strings.Contains(errOut, "run the import again") {
		t.Fatalf("cut import: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := dst2.Store.Stat(context.Background(), "team", mustKey(t, f.big.key)); err == nil {
		t.Fatal("the entry cut short is visible")
	}
	var first int
	dst2.Store.Walk(context.Background(), "team", func(store.Meta) bool { first++; return true })
	wantFirst := slices.Index(f.all(), f.big.key) // members are in key order
	if first != wantFirst {
		t.Errorf("%d entries committed before the cut, want %d", first, wantFirst)
	}
	code, out, errOut = admin(t, dst2.URL, adminSecret, "import", tarPath, "--ns", "team")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("imported %d entries", 6-first)) || !strings.Contains(out, fmt.Sprintf("skipped %d", first)) {
		t.Fatalf("resumed import: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, e := range []seeded{f.a1, f.a2, f.b1, f.old1, f.old2, f.big} {
		if got, _, _ := serverEntry(t, dst2, "team", e.key); got != hex.EncodeToString(sha256Of(e.body)) {
			t.Errorf("%s after the resumed import: sha256 %s", e.key, got)
		}
	}
}

// memberOffset returns where member name's data starts in the tar at path.
func memberOffset(t *testing.T, path, name string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no member %s: %v", name, err)
		}
		if h.Name == name {
			return int64(len(data)) - int64(r.Len())
		}
	}
}

// TestAdminBadInput checks the precise errors of bad input.
func TestAdminBadInput(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	notTar := filepath.Join(dir, "notes.txt")
	os.WriteFile(notTar, bytes.Repeat([]byte("not a tar at all\n"), 100), 0o644)
	empty := filepath.Join(dir, "empty.tar")
	os.WriteFile(empty, nil, 0o644)
	good := filepath.Join(dir, "team.tar")
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--ns", "team", "--out", good); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	tests := []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"not a tar", adminSecret, []string{"import", notTar, "--ns", "team"}, 1, "is not a tar written by 'cachesvc admin export'"},
		{"empty file", adminSecret, []string{"import", empty, "--ns", "team"}, 1, "is empty"},
		{"missing file", adminSecret, []string{"import", filepath.Join(dir, "nope.tar"), "--ns", "team"}, 1, "no such file"},
		{"import without --ns", adminSecret, []string{"import", good}, 2, "--ns is required"},
		{"import two files", adminSecret, []string{"import", good, good, "--ns", "team"}, 2, "exactly one FILE"},
		{"wrong token", "not-a-known-token-0123456789", []string{"list", "--ns", "team"}, 1, "not known to this server"},
		{"wrong token hint", "not-a-known-token-0123456789", []string{"export", "--ns", "team", "-o", filepath.Join(dir, "x.tar")}, 1, "give an admin token"},
		{"no token", "", []string{"list", "--ns", "team"}, 1, "needs a bearer token"},
		{"reader token", viewerSecret, []string{"list", "--ns", "team"}, 1, `lacks admin scope in namespace "team"`},
		{"writer token imports", aliceSecret, []string{"import", good, "--ns", "team"}, 1, "lacks admin scope"},
		{"namespace token lists all", aliceSecret, []string{"list", "--all-namespaces"}, 1, `on every namespace`},
		{"unknown namespace export", adminSecret, []string{"export", "--ns", "nosuchteam", "-o", filepath.Join(dir, "y.tar")}, 1, `Namespace "nosuchteam" has no entries to export`},
		{"invalid namespace", adminSecret, []string{"list", "--ns", "Bad/NS"}, 2, "--ns:"},
		{"export without --out", adminSecret, []string{"export", "--ns", "team"}, 2, "--out is required"},
		{"unknown subcommand", adminSecret, []string{"frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{"min above max", adminSecret, []string{"list", "--min-size", "2MiB", "--max-size", "1MiB"}, 2, "no entry can match"},
		{"ns and all namespaces", adminSecret, []string{"list", "--ns", "team", "--all-namespaces"}, 2, "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := admin(t, f.srv.URL, tc.token, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q (stdout %q)", code, tc.code, errOut, tc.want, out)
			}
			if strings.Count(errOut, "cachesvc admin:") > 1 {
				t.Errorf("doubled prefix: %q", errOut)
			}
		})
	}
	for _, p := range []string{filepath.Join(dir, "x.tar"), filepath.Join(dir, "y.tar")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a failed export left %s", p)
		}
	}
	// The failed imports stored nothing and the writer's refused import
	// left the namespace as it was.
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--json"); code != 0 || !slices.Equal(jsonKeys(t, out), f.all()) {
		t.Errorf("team holds %v after bad imports", jsonKeys(t, out))
	}
}

// TestAdminSubcommandsHaveHelp: every admin subcommand answers --help.
func TestAdminSubcommandsHaveHelp(t *testing.T) {
	for name := range adminCommands {
		code, out, errOut := runCmd(t, "admin", name, "--help")
		if code != 0 || !strings.Contains(out+errOut, "Usage: cachesvc admin "+name) {
			t.Errorf("admin %s --help: exit %d %q", name, code, out+errOut)
		}
	}
}

// Imports of raw streams: what the server says of bad tars and members.
func TestAdminImportRawStreams(t *testing.T) {
	srv := adminServer(t, nil)
	post := func(body io.Reader) (int, []byte) {
		resp := srv.Do(http.MethodPost, srv.URL+"/v1/team/import", body, "Authorization", "Bearer "+adminSecret, "Content-Type", "application/x-tar")
		return resp.StatusCode, apitest.ReadAll(t, resp)
	}
	if code, body := post(strings.NewReader(strings.Repeat("garbage!", 200))); code != http.StatusBadRequest || !bytes.Contains(body, []byte("bad_tar")) {
		t.Errorf("garbage: %d %s", code, body)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	good := []byte("good entry")
	goodKey := strings.Repeat("ab", 32)
	writeMember(t, tw, goodKey, good, map[string]string{wire.PAXSHA256: hex.EncodeToString(sha256Of(good)), wire.PAXWriter: "orig"})
	writeMember(t, tw, "not-a-key", []byte("x"), nil)
	writeMember(t, tw, strings.Repeat("cd", 32), []byte("lying"), map[string]string{wire.PAXSHA256: hex.EncodeToString(sha256Of([]byte("other")))})
	writeMember(t, tw, strings.Repeat("ef", 32), []byte("no sum"), nil)
	tw.Close()
	code, body := post(&buf)
	var res wire.ImportResult
	if err := json.Unmarshal(body, &res); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	codes := []string{}
	for _, f := range res.Failures {
		codes = append(codes, f.Code)
	}
	if res.Imported != 1 || res.Failed != 3 || res.Complete || !slices.Equal(codes, []string{"bad_member", "digest_mismatch", "bad_member"}) {
		t.Errorf("result %+v", res)
	}
	m, err := srv.Store.Stat(context.Background(), "team", mustKey(t, goodKey))
	if err != nil || m.Writer != "orig" {
		t.Errorf("imported entry: %v %+v", err, m)
	}
}

// writeMember writes one PAX member.
func writeMember(t *testing.T, tw *tar.Writer, name string, body []byte, pax map[string]string) {
	t.Helper()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX, PAXRecords: pax}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
}

// TestAdminQuarantine quarantines by filter (dry run first) and by key,
// lists, shows and restores, against the quarantine routes.
func TestAdminQuarantine(t *testing.T) {
	f := newFixture(t, nil)
	status := func(key string) int {
		resp := f.srv.Do(http.MethodGet, f.srv.URL+"/v1/team/entries/"+key, nil, "Authorization", "Bearer "+viewerSecret)
		apitest.ReadAll(t, resp)
		return resp.StatusCode
	}
	code, dry, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--ns", "team", "--writer", "carol", "--reason", "bad jaxlib build", "--dry-run", "--json")
	want := sortedKeys(f.old1, f.old2)
	if code != 0 || !slices.Equal(jsonKeys(t, dry), want) || !strings.Contains(errOut, "would quarantine 2 entries") {
		t.Fatalf("dry run: exit %d %v %s", code, jsonKeys(t, dry), errOut)
	}
	if status(f.old1.key) != http.StatusOK {
		t.Fatal("the dry run quarantined an entry")
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--ns", "team", "--writer", "carol", "--reason", "bad jaxlib build"); code != 2 || !strings.Contains(errOut, "needs --yes") {
		t.Errorf("without --yes: exit %d %s", code, errOut)
	}
	code, real, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--ns", "team", "--writer", "carol", "--reason", "bad jaxlib build", "--yes", "--json")
	if code != 0 || !slices.Equal(jsonKeys(t, real), want) {
		t.Fatalf("quarantine: exit %d %v %s", code, jsonKeys(t, real), errOut)
	}
	if status(f.old1.key) != http.StatusNotFound || status(f.old2.key) != http.StatusNotFound || status(f.a1.key) != http.StatusOK {
		t.Error("quarantined entries are served, or others are not")
	}
	code, out, errOut := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--quarantined", "--json")
	if code != 0 || !slices.Equal(jsonKeys(t, out), want) || !strings.Contains(out, `"cause":"admin"`) || !strings.Contains(out, "bad jaxlib build") {
		t.Errorf("list --quarantined: exit %d %s %s", code, out, errOut)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--quarantined", "--max-size", "100"); code != 0 || !strings.Contains(out, f.old2.key) || strings.Contains(out, f.old1.key) {
		t.Errorf("list --quarantined with a filter: exit %d\n%s", code, out)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--ns", "team", "--json"); code != 0 || len(jsonKeys(t, out)) != 4 {
		t.Errorf("live listing holds %v", jsonKeys(t, out))
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--ns", "team", "-o", filepath.Join(t.TempDir(), "t.tar")); code != 0 || !strings.Contains(errOut, "exported 4 entries") {
		t.Errorf("export with quarantined entries: exit %d %s", code, errOut)
	}
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--ns", "team")
	if code != 0 || !strings.Contains(out, "cause admin") || !strings.Contains(out, "bad jaxlib build") || !strings.Contains(out, "yes: cachesvc admin restore "+f.old1.key) {
		t.Errorf("show a quarantined entry: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "restore", f.old1.key, "--ns", "team")
	if code != 0 || !strings.Contains(out, "restored team/"+f.old1.key) || status(f.old1.key) != http.StatusOK {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "restore", f.old1.key, "--ns", "team"); code != 1 || !strings.Contains(errOut, "not_quarantined") || !strings.Contains(errOut, "list --quarantined") {
		t.Errorf("restore twice: exit %d %s", code, errOut)
	}
	// By key.
	if code, out, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", f.a1.key, "--ns", "team", "--reason", "crashes on load"); code != 0 || !strings.Contains(out, "quarantined team/"+f.a1.key) || status(f.a1.key) != http.StatusNotFound {
		t.Errorf("quarantine KEY: exit %d %s %s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quarantine", f.a2.key, "--ns", "team"}, "--reason is required"},
		{[]string{"quarantine", "--ns", "team", "--reason", "x", "--yes"}, "give at least one filter"},
		{[]string{"quarantine", f.a2.key, "--ns", "team", "--writer", "bob", "--reason", "x"}, "not both"},
		{[]string{"restore", "--ns", "team"}, "name the entries"},
		{[]string{"restore", "nothex", "--ns", "team"}, `KEY "nothex"`},
	} {
		if code, _, errOut := admin(t, f.srv.URL, adminSecret, tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q lacks %q", tc.args, code, errOut, tc.want)
		}
	}
	// A client's report shows with the entry.
	resp := f.srv.Do(http.MethodPost, f.srv.URL+"/v1/team/entries/"+f.a2.key+"/reports", strings.NewReader(`{"reason":"deserialize raised: bad magic","client":"host-7"}`),
		"Authorization", "Bearer "+viewerSecret, "Content-Type", "application/json")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("report: %d %s", resp.StatusCode, b)
	}
	code, out, _ = admin(t, f.srv.URL, adminSecret, "show", f.a2.key, "--ns", "team")
	if code != 0 || !strings.Contains(out, "1 from 1 reporters") || !strings.Contains(out, "viewer/host-7: deserialize raised: bad magic") {
		t.Errorf("show with a report: exit %d\n%s", code, out)
	}
}
