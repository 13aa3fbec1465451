package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// adminIn runs `cachesvc admin ARGS` against url with token, stdin reading
// in.
func adminIn(t *testing.T, in, url, token string, args ...string) (int, string, string) {
	t.Helper()
	all := append([]string{"admin"}, args...)
	all = append(all, "--url", url, "--token", token)
	var out, errb bytes.Buffer
	code := run(t.Context(), all, strings.NewReader(in), &out, &errb)
	return code, out.String(), errb.String()
}

// TestAdminDeleteByKey deletes entries named by KEY arguments, by
// --keys-from FILE and by --keys-from - (stdin) against a real server:
// exactly those go; a dry run says which are stored and deletes nothing; a
// KEY not stored exits 1 after the others are deleted; bad input deletes
// nothing and exits 2 saying what to fix.
func TestAdminDeleteByKey(t *testing.T) {
	f := newFixture(t, nil)
	url := f.srv.URL
	stored := func(e seeded) bool {
		_, err := f.srv.Store.Stat(context.Background(), "team", mustKey(t, e.key))
		return err == nil
	}
	const missing = "00000000000000000000000000000000000000000000000000000000000000aa"

	refusals := []struct {
		name string
		in   string
		args []string
		want string
	}{
		{"KEY and a filter", "", []string{"delete", f.a1.key, "--namespace", "team", "--run", "run-1", "--yes"}, "not both"},
		{"KEY and --all", "", []string{"delete", f.a1.key, "--namespace", "team", "--all", "--yes"}, "not both"},
		{"KEY in every namespace", "", []string{"delete", f.a1.key, "--all-namespaces", "--yes"}, "give --namespace, not --all-namespaces"},
		{"bad KEY", "", []string{"delete", f.a1.key, "nope", "--namespace", "team", "--yes"}, `KEY "nope"`},
		{"bad line", f.a1.key + "\nnope\n", []string{"delete", "--keys-from", "-", "--namespace", "team", "--yes"}, "--keys-from stdin, line 2: "},
		{"empty list", "# nothing\n\n", []string{"delete", "--keys-from", "-", "--namespace", "team", "--yes"}, "holds no KEYs"},
		{"stdin without --yes", f.a1.key + "\n", []string{"delete", "--keys-from", "-", "--namespace", "team"}, "give --yes"},
		{"no --yes off a terminal", "", []string{"delete", f.a1.key, "--namespace", "team"}, "needs --yes"},
		{"missing file", "", []string{"delete", "--keys-from", filepath.Join(t.TempDir(), "none"), "--namespace", "team", "--yes"}, "no such file"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := adminIn(t, tc.in, url, adminSecret, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want 2), stderr %q lacks %q", code, errOut, tc.want)
			}
		})
	}
	for _, e := range []seeded{f.a1, f.a2, f.b1, f.old1, f.old2, f.big} {
		if !stored(e) {
			t.Fatalf("a refused delete removed %s", e.key)
		}
	}

	// Dry run: says which KEYs are stored, deletes nothing.
	code, out, errOut := adminIn(t, "", url, adminSecret, "delete", f.a1.key, missing, "--namespace", "team", "--dry-run", "--json")
	if code != 0 || !strings.Contains(errOut, "would delete 1 entry (") || !strings.Contains(errOut, "1 KEY is not stored") {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	var got []keyResult
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r keyResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("dry run line %q: %v", l, err)
		}
		got = append(got, r)
	}
	want := []keyResult{{"team", f.a1.key, "would_delete", int64(len(f.a1.body))}, {"team", missing, "not_found", 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("dry run printed %+v, want %+v", got, want)
	}
	if !stored(f.a1) {
		t.Fatal("the dry run deleted an entry")
	}

	// KEY arguments.
	code, out, errOut = adminIn(t, "", url, adminSecret, "delete", f.a1.key, f.a2.key, "--namespace", "team", "--yes")
	if code != 0 || out != "deleted team/"+f.a1.key+"\ndeleted team/"+f.a2.key+"\n" || !strings.Contains(errOut, "deleted 2 entries") {
		t.Fatalf("delete KEYs: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A file of KEYs, with a comment and a blank line.
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# from the sweep\n"+f.b1.key+"\n\n  "+f.old1.key+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := adminIn(t, "", url, adminSecret, "delete", "--keys-from", file, "--namespace", "team", "--yes"); code != 0 || !strings.Contains(errOut, "deleted 2 entries") {
		t.Fatalf("delete --keys-from FILE: exit %d: %s", code, errOut)
	}
	// Stdin, with a KEY already deleted and one never stored: the rest go,
	// then exit 1 naming them.
	in := f.old2.key + "\n" + f.a1.key + "\n" + missing + "\n"
	code, out, errOut = adminIn(t, in, url, adminSecret, "delete", "--keys-from", "-", "--namespace", "team", "--yes")
	if code != 1 || !strings.Contains(out, "deleted team/"+f.old2.key) || !strings.Contains(out, "not found: team/"+missing) ||
		!strings.Contains(errOut, "2 of the KEYs are not stored in namespace \"team\"") || !strings.Contains(errOut, missing) {
		t.Fatalf("delete --keys-from - with KEYs not stored: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, e := range []seeded{f.a1, f.a2, f.b1, f.old1, f.old2} {
		if stored(e) {
			t.Errorf("%s is still stored", e.key)
		}
	}
	if !stored(f.big) {
		t.Error("an entry no KEY named was deleted")
	}
	if _, err := f.srv.Store.Stat(context.Background(), "other", mustKey(t, f.other.key)); err != nil {
		t.Errorf("another namespace's entry was touched: %v", err)
	}
	// A token without admin scope deletes nothing and says what it needs.
	if code, _, errOut := adminIn(t, "", url, aliceSecret, "delete", f.big.key, "--namespace", "team", "--yes"); code != 1 || !strings.Contains(errOut, "admin scope") || !stored(f.big) {
		t.Errorf("a writer token's delete: exit %d: %s", code, errOut)
	}
}
