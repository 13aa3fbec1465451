package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestAdminQuarantine quarantines by filter (dry run first) and by key,
// lists, shows and restores, against the quarantine routes.
func TestAdminQuarantine(t *testing.T) {
	f := newFixture(t, nil)
	status := func(key string) int {
		resp := f.srv.Do(http.MethodGet, f.srv.URL+"/v1/team/entries/"+key, nil, "Authorization", "Bearer "+viewerSecret)
		apitest.ReadAll(t, resp)
		return resp.StatusCode
	}
	code, dry, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--namespace", "team", "--writer", "carol", "--reason", "bad jaxlib build", "--dry-run", "--json")
	want := sortedKeys(f.old1, f.old2)
	if code != 0 || !slices.Equal(jsonKeys(t, dry), want) || !strings.Contains(errOut, "would quarantine 2 entries") {
		t.Fatalf("dry run: exit %d %v %s", code, jsonKeys(t, dry), errOut)
	}
	if status(f.old1.key) != http.StatusOK {
		t.Fatal("the dry run quarantined an entry")
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--namespace", "team", "--writer", "carol", "--reason", "bad jaxlib build"); code != 2 || !strings.Contains(errOut, "needs --yes") {
		t.Errorf("without --yes: exit %d %s", code, errOut)
	}
	code, real, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", "--namespace", "team", "--writer", "carol", "--reason", "bad jaxlib build", "--yes", "--json")
	if code != 0 || !slices.Equal(jsonKeys(t, real), want) {
		t.Fatalf("quarantine: exit %d %v %s", code, jsonKeys(t, real), errOut)
	}
	if status(f.old1.key) != http.StatusNotFound || status(f.old2.key) != http.StatusNotFound || status(f.a1.key) != http.StatusOK {
		t.Error("quarantined entries are served, or others are not")
	}
	code, out, errOut := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--quarantined", "--json")
	if code != 0 || !slices.Equal(jsonKeys(t, out), want) || !strings.Contains(out, `"cause":"admin"`) || !strings.Contains(out, "bad jaxlib build") {
		t.Errorf("list --quarantined: exit %d %s %s", code, out, errOut)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--quarantined", "--max-size", "100"); code != 0 || !strings.Contains(out, f.old2.key) || strings.Contains(out, f.old1.key) {
		t.Errorf("list --quarantined with a filter: exit %d\n%s", code, out)
	}
	if code, out, _ := admin(t, f.srv.URL, adminSecret, "list", "--namespace", "team", "--json"); code != 0 || len(jsonKeys(t, out)) != 4 {
		t.Errorf("live listing holds %v", jsonKeys(t, out))
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "export", "--namespace", "team", "-o", filepath.Join(t.TempDir(), "t.tar")); code != 0 || !strings.Contains(errOut, "exported 4 entries") {
		t.Errorf("export with quarantined entries: exit %d %s", code, errOut)
	}
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "show", f.old1.key, "--namespace", "team")
	if code != 0 || !strings.Contains(out, "cause admin") || !strings.Contains(out, "bad jaxlib build") || !strings.Contains(out, "yes: cachesvc admin restore "+f.old1.key) {
		t.Errorf("show a quarantined entry: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = admin(t, f.srv.URL, adminSecret, "restore", f.old1.key, "--namespace", "team")
	if code != 0 || !strings.Contains(out, "restored team/"+f.old1.key) || status(f.old1.key) != http.StatusOK {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	if code, _, errOut := admin(t, f.srv.URL, adminSecret, "restore", f.old1.key, "--namespace", "team"); code != 1 || !strings.Contains(errOut, "not_quarantined") || !strings.Contains(errOut, "list --quarantined") {
		t.Errorf("restore twice: exit %d %s", code, errOut)
	}
	// By key.
	if code, out, errOut := admin(t, f.srv.URL, adminSecret, "quarantine", f.a1.key, "--namespace", "team", "--reason", "crashes on load"); code != 0 || !strings.Contains(out, "quarantined team/"+f.a1.key) || status(f.a1.key) != http.StatusNotFound {
		t.Errorf("quarantine KEY: exit %d %s %s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quarantine", f.a2.key, "--namespace", "team"}, "--reason is required"},
		{[]string{"quarantine", "--namespace", "team", "--reason", "x", "--yes"}, "give at least one filter"},
		{[]string{"quarantine", f.a2.key, "--namespace", "team", "--writer", "bob", "--reason", "x"}, "not both"},
		{[]string{"restore", "--namespace", "team"}, "name the entries"},
		{[]string{"restore", "nothex", "--namespace", "team"}, `KEY "nothex"`},
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
	code, out, _ = admin(t, f.srv.URL, adminSecret, "show", f.a2.key, "--namespace", "team")
	if code != 0 || !strings.Contains(out, "1 from 1 reporters") || !strings.Contains(out, "viewer/host-7: deserialize raised: bad magic") {
		t.Errorf("show with a report: exit %d\n%s", code, out)
	}
}
