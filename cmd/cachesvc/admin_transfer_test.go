package main

import (
	"archive/tar"
	"bytes"
	"context"
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

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

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
	code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--namespace", "team", "-o", tarPath)
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
	code, out, errOut := admin(t, dst.URL, adminSecret, "import", tarPath, "--namespace", "team", "--verify-key", filepath.Join(dir, "sign.key.pub"))
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
	code, out, errOut = admin(t, dst.URL, adminSecret, "import", tarPath, "--namespace", "team")
	if code != 0 || !strings.Contains(out, "imported 0 entries") || !strings.Contains(out, "skipped 6 already present") {
		t.Errorf("second import: exit %d\n%s\n%s", code, out, errOut)
	}

	// Through stdout and stdin: the same bytes as a file exported just
	// before (an export counts no access, so nothing in it changed).
	again := filepath.Join(dir, "again.tar")
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--namespace", "team", "-o", again); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	code, stdoutTar, errOut := admin(t, f.srv.URL, adminSecret, "export", "--namespace", "team", "--out", "-")
	fileTar, _ := os.ReadFile(again)
	if code != 0 || stdoutTar != string(fileTar) {
		t.Errorf("export to stdout: exit %d, %d bytes vs the file's %d: %s", code, len(stdoutTar), len(fileTar), errOut)
	}
	var sout, serr bytes.Buffer
	dst4 := adminServer(t, nil)
	// The old flag names --ns and --server still work, as aliases.
	code = run(t.Context(), []string{"admin", "import", "-", "--ns", "team", "--server", dst4.URL, "--token", adminSecret},
		strings.NewReader(stdoutTar), &sout, &serr)
	if code != 0 || !strings.Contains(sout.String(), "imported 6 entries") {
		t.Errorf("import from stdin: exit %d %s %s", code, sout.String(), serr.String())
	}

	// Signatures that do not verify with the given key import nothing.
	newSigner(t, filepath.Join(dir, "stranger.key"))
	dst3 := adminServer(t, nil)
	code, out, errOut = admin(t, dst3.URL, adminSecret, "import", tarPath, "--namespace", "team", "--verify-key", filepath.Join(dir, "stranger.key.pub"))
	if code != 1 || !strings.Contains(out, "imported 0 entries") || strings.Count(out, "bad_signature") != 6 || !strings.Contains(errOut, "6 entries of") {
		t.Errorf("import with a stranger's key: exit %d\n%s\n%s", code, out, errOut)
	}
	// Exported by a server whose key is being rotated: the old key among
	// the trusted ones is enough.
	dst5 := adminServer(t, nil)
	code, out, errOut = admin(t, dst5.URL, adminSecret, "import", tarPath, "--namespace", "team", "--verify-key", filepath.Join(dir, "stranger.key.pub")+","+filepath.Join(dir, "sign.key.pub"))
	if code != 0 || !strings.Contains(out, "imported 6 entries") {
		t.Errorf("import trusting a stranger's key and the signer's: exit %d\n%s\n%s", code, out, errOut)
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
	code, out, errOut = admin(t, dst2.URL, adminSecret, "import", cut, "--namespace", "team")
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
	code, out, errOut = admin(t, dst2.URL, adminSecret, "import", tarPath, "--namespace", "team")
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
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--namespace", "team", "--out", good); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	tests := []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"not a tar", adminSecret, []string{"import", notTar, "--namespace", "team"}, 1, "is not a tar written by 'cachesvc admin export'"},
		{"empty file", adminSecret, []string{"import", empty, "--namespace", "team"}, 1, "is empty"},
		{"missing file", adminSecret, []string{"import", filepath.Join(dir, "nope.tar"), "--namespace", "team"}, 1, "no such file"},
		{"import without --namespace", adminSecret, []string{"import", good}, 2, "--namespace is required"},
		{"import two files", adminSecret, []string{"import", good, good, "--namespace", "team"}, 2, "exactly one FILE"},
		{"wrong token", "not-a-known-token-0123456789", []string{"list", "--namespace", "team"}, 1, "not known to this server"},
		{"wrong token hint", "not-a-known-token-0123456789", []string{"export", "--namespace", "team", "-o", filepath.Join(dir, "x.tar")}, 1, "give an admin token"},
		{"no token", "", []string{"list", "--namespace", "team"}, 1, "needs a bearer token"},
		{"reader token", viewerSecret, []string{"list", "--namespace", "team"}, 1, `lacks admin scope in namespace "team"`},
		{"writer token imports", aliceSecret, []string{"import", good, "--namespace", "team"}, 1, "lacks admin scope"},
		{"reader token imports elsewhere", viewerSecret, []string{"import", good, "--namespace", "other"}, 1, "admin commands need a token with admin scope there"},
		{"namespace token lists all", aliceSecret, []string{"list", "--all-namespaces"}, 1, `on every namespace`},
		{"unknown namespace export", adminSecret, []string{"export", "--namespace", "nosuchteam", "-o", filepath.Join(dir, "y.tar")}, 1, `Namespace "nosuchteam" has no entries to export`},
		{"invalid namespace", adminSecret, []string{"list", "--namespace", "Bad/NS"}, 2, "--namespace:"},
		{"export without --out", adminSecret, []string{"export", "--namespace", "team"}, 2, "--out is required"},
		{"export to a directory", adminSecret, []string{"export", "--namespace", "team", "-o", dir}, 2, "is a directory: name a file"},
		{"unknown subcommand", adminSecret, []string{"frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{"min above max", adminSecret, []string{"list", "--min-size", "2MiB", "--max-size", "1MiB"}, 2, "no entry can match"},
		{"ns and all namespaces", adminSecret, []string{"list", "--namespace", "team", "--all-namespaces"}, 2, "not both"},
		// A stray argument before flags is named alone (the flags after it
		// are read); delete takes KEYs or filters, not both.
		{"stray argument before flags", adminSecret, []string{"list", "extra", "--namespace", "team"}, 2, "unexpected arguments: extra\n"},
		{"bad flag after a stray argument", adminSecret, []string{"list", "extra", "--bogus"}, 2, "unknown flag --bogus"},
		{"export FILE", adminSecret, []string{"export", "team.tar", "--namespace", "team"}, 2, "unexpected arguments: team.tar (the file goes in --out, e.g. --out team.tar)\n"},
		{"delete KEY and a filter", adminSecret, []string{"delete", f.a1.key, "--namespace", "team", "--writer", "alice", "--yes"}, 2, "give KEYs (arguments or --keys-from) or filters (or --all), not both"},
		{"delete a stray argument", adminSecret, []string{"delete", "extra", "--namespace", "team", "--yes"}, 2, `KEY "extra": `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := admin(t, f.srv.URL, tc.token, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q (stdout %q)", code, tc.code, errOut, tc.want, out)
			}
			if n := strings.Count(errOut, "(admin commands need") + strings.Count(errOut, "(give an admin token"); n > 1 {
				t.Errorf("stderr %q gives its hint %d times", errOut, n)
			}
			path := "admin " + tc.args[0] // the subcommand's path, or admin's for an unknown one
			if tc.args[0] == "frobnicate" {
				path = "admin"
			}
			if !strings.HasPrefix(errOut, "cachesvc "+path+": ") {
				t.Errorf("stderr %q does not start with the command path %q", errOut, "cachesvc "+path+": ")
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
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--json"); code != 0 || !slices.Equal(jsonKeys(t, out), f.all()) {
		t.Errorf("team holds %v after bad imports", jsonKeys(t, out))
	}
}

// TestAdminImportRawStreams posts raw streams: what the server says of
// bad tars and of bad members among good ones.
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
	// A record longer than 64 characters once made hex.Decode index past
	// the digest: a handler panic, answered 500.
	writeMember(t, tw, strings.Repeat("12", 32), []byte("long sum"), map[string]string{wire.PAXSHA256: hex.EncodeToString(sha256Of([]byte("long sum"))) + "00"})
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
	if res.Imported != 1 || res.Failed != 4 || res.Complete || !slices.Equal(codes, []string{"bad_member", "digest_mismatch", "bad_member", "bad_member"}) {
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

// TestAdminImportGoesPastEntriesThatNeverFit imports, into a smaller
// server, an export holding an entry larger than the whole store and one
// larger than the namespace's quota: both are listed as failed and the
// import goes on with the entries after them (it used to stop at the
// first, so that no rerun ever got past it).
func TestAdminImportGoesPastEntriesThatNeverFit(t *testing.T) {
	srv := adminServerWith(t, apitest.Options{MaxBytes: 1 << 20, Store: func(c *store.Config) {
		c.Quotas = store.Quotas{Namespaces: map[string]store.Quota{"team": {MaxBytes: 256 << 10}}}
	}})
	members := []struct {
		name string
		size int
	}{{"first", 1 << 10}, {"bigger than the store", 2 << 20}, {"bigger than the quota", 300 << 10}, {"last", 1 << 10}}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	keys := make([]string, len(members))
	for i, m := range members {
		body := bytes.Repeat([]byte{byte(i + 1)}, m.size)
		keys[i] = storeKey(m.name)
		writeMember(t, tw, keys[i], body, map[string]string{wire.PAXSHA256: hex.EncodeToString(sha256Of(body))})
	}
	summary, _ := json.Marshal(wire.ExportSummary{Namespace: "team", Entries: len(members)})
	writeMember(t, tw, wire.ExportMember, summary, nil)
	tw.Close()
	file := filepath.Join(t.TempDir(), "team.tar")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := admin(t, srv.URL, adminSecret, "import", file, "--namespace", "team")
	if code != 1 || !strings.Contains(out, "imported 2 entries") || !strings.Contains(out, "2 failed") ||
		!strings.Contains(out, keys[1]+": store_full") || !strings.Contains(out, keys[2]+": quota_exceeded") ||
		!strings.Contains(errOut, "2 entries of") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for i, k := range keys {
		_, err := srv.Store.Stat(context.Background(), "team", mustKey(t, k))
		if stored := err == nil; stored != (i == 0 || i == 3) {
			t.Errorf("member %q: stored %v (%v)", members[i].name, stored, err)
		}
	}
}
