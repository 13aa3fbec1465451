package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
)

// TestResolveVersion checks the version a binary reports for each way it
// can be built. Before, every build without -ldflags reported "dev".
func TestResolveVersion(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "56e466ac95c2a07ab3ca3b9efd8242848658411b"
	devel := debug.Module{Path: "github.com/cachesvc/cachesvc", Version: "(devel)"}
	tests := []struct {
		name    string
		ldflags string
		bi      *debug.BuildInfo
		want    string
	}{
		{"-ldflags -X wins", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204141035-56e466ac95c2"}, Settings: vcs(rev, "2026-12-04T14:10:35Z", "false")}, "v1.2.3"},
		{"go install module@version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"go build, Go 1.24+: its pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204141035-56e466ac95c2+dirty"}, Settings: vcs(rev, "2026-12-04T14:10:35Z", "true")}, "v0.0.0-20261204141035-56e466ac95c2+dirty"},
		{"(devel) with VCS settings", "", &debug.BuildInfo{Main: devel, Settings: vcs(rev, "2026-12-04T14:10:35Z", "false")}, "v0.0.0-20261204141035-56e466ac95c2"},
		{"(devel), uncommitted changes", "", &debug.BuildInfo{Main: devel, Settings: vcs(rev, "2026-12-04T14:10:35Z", "true")}, "v0.0.0-20261204141035-56e466ac95c2+dirty"},
		{"a commit time in another zone is UTC", "", &debug.BuildInfo{Main: devel, Settings: vcs(rev, "2026-12-04T15:10:35+01:00", "false")}, "v0.0.0-20261204141035-56e466ac95c2"},
		{"no commit time", "", &debug.BuildInfo{Main: devel, Settings: vcs(rev, "", "false")}, "v0.0.0-00010101000000-56e466ac95c2"},
		{"go run, -buildvcs=false: nothing to tell", "", &debug.BuildInfo{Main: devel}, "dev"},
		{"a short revision is not one", "", &debug.BuildInfo{Main: devel, Settings: vcs("56e4", "2026-12-04T14:10:35Z", "false")}, "dev"},
		{"no build information", "", nil, "dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveVersion(tc.ldflags, tc.bi); got != tc.want {
				t.Errorf("resolveVersion(%q, ...) = %q, want %q", tc.ldflags, got, tc.want)
			}
		})
	}
}

// TestVersionsSortByCommitTime checks that the versions of two builds sort
// as their commits do, also as plain strings (a dashboard's sort, an
// alert's label order), whatever their revisions.
func TestVersionsSortByCommitTime(t *testing.T) {
	older := resolveVersion("", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "ffff66ac95c2a07ab3ca3b9efd8242848658411b"}, {Key: "vcs.time", Value: "2026-12-03T09:00:00Z"}}})
	newer := resolveVersion("", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0000e466ac95c2a07ab3ca3b9efd824284865841"}, {Key: "vcs.time", Value: "2026-12-04T09:00:00Z"}}})
	got := []string{newer, older}
	sort.Strings(got)
	if got[0] != older {
		t.Errorf("sorted %q: the older commit's build %q sorts after the newer's", got, older)
	}
}

// TestPlainBuildReportsItsRevision builds the command from this checkout
// with `go build` and no -ldflags, as a replica is often built, and checks
// that `cachesvc version` reports a version that names the checkout's
// revision rather than "dev". -buildvcs=true because an environment may set
// GOFLAGS=-buildvcs=false, which leaves nothing to report.
func TestPlainBuildReportsItsRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command: skipped in -short mode")
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (git rev-parse HEAD: %v)", err)
	}
	rev := strings.TrimSpace(string(out))[:12]
	bin := filepath.Join(t.TempDir(), "cachesvc")
	cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	out, err = exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	first := strings.Fields(strings.SplitN(string(out), "\n", 2)[0]) // cachesvc VERSION [(rev)] goX
	if len(first) < 3 || !strings.HasPrefix(first[1], "v0.0.0-") || !strings.Contains(first[1], "-"+rev) {
		t.Errorf("cachesvc version of a plain go build: %q, want v0.0.0-<time>-%s[+dirty]", strings.TrimSpace(string(out)), rev)
	}
	if strings.Count(string(out), rev) != 1 {
		t.Errorf("the revision is named %d times in %q, want once", strings.Count(string(out), rev), out)
	}
}
