package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminSummariesSayOneEntry runs each admin command whose summary
// counts entries so that it counts exactly one, against a real server: the
// summary says "1 entry", never "1 entries" (nor "1 KEYs are"). The steps
// run in order on one fixture (export, import and quarantine change it).
func TestAdminSummariesSayOneEntry(t *testing.T) {
	f := newFixture(t, nil)
	const missing = "00000000000000000000000000000000000000000000000000000000000000aa"
	tarPath := filepath.Join(t.TempDir(), "other.tar")
	steps := []struct {
		name string
		args []string
		want []string // in stdout or stderr
	}{
		{"list", []string{"list", "--namespace", "team", "--writer", "bob", "--backend", "pt2", "--run", "run-3"}, []string{"1 entry ("}},
		{"delete dry run", []string{"delete", "--namespace", "team", "--older-than", "71h30m", "--dry-run"}, []string{"would delete 1 entry ("}},
		{"delete KEY dry run", []string{"delete", f.a1.key, missing, "--namespace", "team", "--dry-run"}, []string{"would delete 1 entry (", "1 KEY is not stored"}},
		{"quarantine dry run", []string{"quarantine", "--namespace", "team", "--older-than", "71h30m", "--reason", "test", "--dry-run"}, []string{"would quarantine 1 entry ("}},
		{"export", []string{"export", "--namespace", "other", "-o", tarPath}, []string{"exported 1 entry ("}},
		{"import", []string{"import", tarPath, "--namespace", "copy"}, []string{"imported 1 entry ("}},
		{"quarantine", []string{"quarantine", "--namespace", "team", "--older-than", "71h30m", "--reason", "test", "--yes"}, []string{"quarantined 1 entry ("}},
		{"list quarantined", []string{"list", "--namespace", "team", "--quarantined"}, []string{"1 quarantined entry ("}},
		{"delete KEY", []string{"delete", f.a1.key, "--namespace", "team", "--yes"}, []string{"deleted 1 entry "}},
	}
	for _, s := range steps {
		code, out, errOut := admin(t, f.srv.URL, adminSecret, s.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", s.name, code, errOut)
		}
		for _, w := range s.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%s: output lacks %q:\n%s%s", s.name, w, out, errOut)
			}
		}
		if strings.Contains(out+errOut, "1 entries") {
			t.Errorf("%s: says \"1 entries\":\n%s%s", s.name, out, errOut)
		}
	}
}
