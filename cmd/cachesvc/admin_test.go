package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	return adminServerWith(t, apitest.Options{API: func(c *api.Config) { c.Signer = signer }})
}

// adminServerWith is adminServer on a server started with opts (its API
// function still runs), under the same tokens.
func adminServerWith(t *testing.T, opts apitest.Options) *apitest.Server {
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
	adjust := opts.API
	opts.API = func(c *api.Config) {
		c.Auth = g
		if adjust != nil {
			adjust(c)
		}
	}
	return apitest.Start(t, opts)
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
	all = append(all, "--url", url)
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
			code, out, errOut := admin(t, f.srv.URL, adminSecret, append([]string{"list", "--namespace", "team", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := jsonKeys(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
			if want := plural(len(tc.want), "entry", "entries") + " ("; !strings.HasPrefix(errOut, want) {
				t.Errorf("summary %q does not start %q", errOut, want)
			}
		})
	}
	t.Run("table", func(t *testing.T) {
		code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--writer", "carol")
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
	code, out, errOut := admin(t, srv.URL, adminSecret, "list", "--namespace", "team", "--json")
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
	code, dry, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--namespace", "team", "--writer", "bob", "--dry-run", "--json")
	if code != 0 || !strings.Contains(errOut, "would delete 2 entries") {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	want := sortedKeys(f.b1, f.big)
	if got := jsonKeys(t, dry); !slices.Equal(got, want) {
		t.Fatalf("dry run listed %v, want %v", got, want)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--json"); code != 0 || !slices.Equal(jsonKeys(t, out), f.all()) {
		t.Fatalf("the dry run deleted something: %v", jsonKeys(t, out))
	}
	code, real, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--namespace", "team", "--writer", "bob", "--yes", "--json")
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
		{"no filter", []string{"delete", "--namespace", "team", "--yes"}, 2, "at least one filter"},
		{"all with filter", []string{"delete", "--namespace", "team", "--all", "--writer", "x", "--yes"}, 2, "without filters"},
		{"no --yes off a terminal", []string{"delete", "--namespace", "team", "--writer", "alice"}, 2, "needs --yes"},
		{"bad age", []string{"delete", "--namespace", "team", "--older-than", "soon", "--yes"}, 2, "--older-than"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := admin(t, f.srv.URL, adminSecret, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q", code, tc.code, errOut, tc.want)
			}
		})
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--json"); code != 0 || len(jsonKeys(t, out)) != 4 {
		t.Errorf("a refused delete removed entries: %v", jsonKeys(t, out))
	}
	// Filters never come from the environment.
	os.Setenv("CACHESVC_WRITER", "alice")
	defer os.Unsetenv("CACHESVC_WRITER")
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "delete", "--namespace", "team", "--yes"); code != 2 || !strings.Contains(errOut, "at least one filter") {
		t.Errorf("CACHESVC_WRITER acted as a filter: exit %d %s", code, errOut)
	}
}

// TestAdminShow shows an entry's provenance and checks its signature.
func TestAdminShow(t *testing.T) {
	dir := t.TempDir()
	signer := newSigner(t, filepath.Join(dir, "sign.key"))
	f := newFixture(t, signer)
	code, out, errOut := admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--namespace", "team", "--verify-key", filepath.Join(dir, "sign.key.pub"))
	for _, want := range []string{"writer:          carol", "run:             run-0", "backend:         xla", "jaxlib=0.4.30, team=infra",
		"flags=sha256:def, module=sha256:abc", "valid (verified with", "compile seconds: 40", hex.EncodeToString(sha256Of(f.old1.body))} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// CACHESVC_VERIFY_KEY as the Python client takes it (base64, or the
	// .pub file's text) is the key itself, not a file name.
	pubPEM, err := os.ReadFile(filepath.Join(dir, "sign.key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := auth.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{auth.EncodePublicKey(pub), string(pubPEM)} {
		t.Setenv("CACHESVC_VERIFY_KEY", v)
		code, out, errOut := admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--namespace", "team")
		if code != 0 || !strings.Contains(out, "valid (verified with key "+auth.EncodePublicKey(pub)+")") {
			t.Errorf("CACHESVC_VERIFY_KEY=%q: exit %d\n%s\n%s", v, code, out, errOut)
		}
	}
	os.Unsetenv("CACHESVC_VERIFY_KEY")
	newSigner(t, filepath.Join(dir, "other.key"))
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--namespace", "team", "--verify-key", filepath.Join(dir, "other.key.pub"))
	if code != 1 || !strings.Contains(out, "INVALID") || !strings.Contains(errOut, "does not verify") {
		t.Errorf("wrong key: exit %d\n%s\n%s", code, out, errOut)
	}
	// Trusting two keys (a rotation), show names the one that verified.
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--namespace", "team",
		"--verify-key", filepath.Join(dir, "sign.key.pub"), "--verify-key", filepath.Join(dir, "other.key.pub"))
	if code != 0 || !strings.Contains(out, "valid (verified with "+filepath.Join(dir, "sign.key.pub")+")") {
		t.Errorf("two keys: exit %d\n%s\n%s", code, out, errOut)
	}
	missing := strings.Repeat("0", 64)
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "show", missing, "--namespace", "team"); code != 1 || !strings.Contains(errOut, "No entry with key "+missing) {
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

// TestAdminSubcommandsHaveHelp: every admin subcommand answers --help on
// stdout with its usage line, operands included, and the shared client
// flags under their names (--url, --namespace) with their aliases.
func TestAdminSubcommandsHaveHelp(t *testing.T) {
	usage := map[string]string{
		"list":       "Usage: cachesvc admin list [flags]\n",
		"delete":     "Usage: cachesvc admin delete [flags] [KEY...]\n",
		"show":       "Usage: cachesvc admin show [flags] KEY\n",
		"export":     "Usage: cachesvc admin export [flags]\n",
		"import":     "Usage: cachesvc admin import [flags] FILE|-\n",
		"quarantine": "Usage: cachesvc admin quarantine [flags] [KEY...]\n",
		"restore":    "Usage: cachesvc admin restore [flags] KEY...\n",
	}
	for _, c := range adminGroup.subs {
		code, out, errOut := runCmd(t, "admin", c.name, "--help")
		if code != 0 || errOut != "" || !strings.HasPrefix(out, usage[c.name]) {
			t.Errorf("admin %s --help: exit %d, stdout %q, stderr %q; want it to start with %q", c.name, code, out, errOut, usage[c.name])
		}
		for _, want := range []string{"--url URL (alias --server)\t[CACHESVC_URL; alias CACHESVC_SERVER]", "--namespace namespace (alias --ns)\t[CACHESVC_NAMESPACE; alias CACHESVC_NS]"} {
			if !strings.Contains(out, want) {
				t.Errorf("admin %s --help lacks %q:\n%s", c.name, want, out)
			}
		}
	}
	if len(usage) != len(adminGroup.subs) {
		t.Errorf("the test knows %d admin subcommands, the group has %d", len(usage), len(adminGroup.subs))
	}
}

// TestAdminClientFlagsFromEnv: admin reads the server, namespace and token
// from the client commands' variables (CACHESVC_URL, CACHESVC_NAMESPACE,
// CACHESVC_TOKEN) and their old names (CACHESVC_SERVER, CACHESVC_NS); a
// namespace from the environment counts for import's required namespace
// but does not conflict with --all-namespaces on the command line.
func TestAdminClientFlagsFromEnv(t *testing.T) {
	f := newFixture(t, nil)
	empty := filepath.Join(t.TempDir(), "empty.tar")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	everything := append(f.all(), f.other.key)
	slices.Sort(everything)
	adminFile := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(adminFile, []byte(adminSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		keys    []string // with --json: the keys listed
		stderr  string
		noStale bool // stderr must not call a variable an old name
	}{
		{"new names", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_NAMESPACE": "team"},
			[]string{"list", "--json"}, 0, f.all(), "6 entries", true},
		{"old names", map[string]string{"CACHESVC_SERVER": f.srv.URL, "CACHESVC_NS": "other"},
			[]string{"list", "--json"}, 0, []string{f.other.key}, "CACHESVC_NS is an old name of CACHESVC_NAMESPACE", false},
		{"flag beats variable", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_NAMESPACE": "other"},
			[]string{"list", "--json", "--namespace", "team"}, 0, f.all(), "6 entries", true},
		{"variable namespace and --all-namespaces", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_NAMESPACE": "team"},
			[]string{"list", "--json", "--all-namespaces"}, 0, everything, "in every namespace", true},
		{"import namespace from the variable", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_NAMESPACE": "team"},
			[]string{"import", empty}, 1, nil, "is empty", true},
		{"import without any namespace", map[string]string{"CACHESVC_URL": f.srv.URL},
			[]string{"import", empty}, 2, nil, "cachesvc admin import: --namespace is required", true},
		// CACHESVC_TOKEN_FILE in a profile and --token for one command
		// (and the other way round): the command line wins, as for every flag.
		{"--token beats CACHESVC_TOKEN_FILE", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_TOKEN": "", "CACHESVC_TOKEN_FILE": empty},
			[]string{"list", "--json", "--namespace", "team", "--token", adminSecret}, 0, f.all(), "6 entries", true},
		{"--token-file beats CACHESVC_TOKEN", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_TOKEN": "not-a-known-token"},
			[]string{"list", "--json", "--namespace", "team", "--token-file", adminFile}, 0, f.all(), "6 entries", true},
		{"both variables", map[string]string{"CACHESVC_URL": f.srv.URL, "CACHESVC_TOKEN_FILE": adminFile},
			[]string{"list", "--namespace", "team"}, 2, nil, "CACHESVC_TOKEN and CACHESVC_TOKEN_FILE are both set", true},
		{"both flags", map[string]string{"CACHESVC_URL": f.srv.URL},
			[]string{"list", "--namespace", "team", "--token", adminSecret, "--token-file", adminFile}, 2, nil, "give --token or --token-file, not both", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CACHESVC_TOKEN": adminSecret}
			for k, v := range tc.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			sio := stdio{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
			code := dispatch(t.Context(), append([]string{"admin"}, tc.args...), sio)
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q lacks %q", code, tc.code, stderr.String(), tc.stderr)
			}
			if tc.noStale && strings.Contains(stderr.String(), "old name") {
				t.Errorf("stderr %q calls a current variable an old name", stderr.String())
			}
			if code == 0 {
				if got := jsonKeys(t, stdout.String()); !slices.Equal(got, tc.keys) {
					t.Errorf("listed %v, want %v", got, tc.keys)
				}
			}
		})
	}
}
