package s3test_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSeaweedFSScriptUsage: scripts/seaweedfs.sh --help prints its usage
// and builds nothing (the build takes minutes; it used to start on any
// argument), and an unknown argument is a usage error. The environment
// points the script at an empty cache and a version that does not exist,
// so that a build it started would fail rather than take minutes.
func TestSeaweedFSScriptUsage(t *testing.T) {
	env := append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "SEAWEEDFS_VERSION=v0.0.0-00010101000000-000000000000", "GOPROXY=off")
	tests := []struct {
		arg      string
		wantCode int
		want     string
	}{
		{"--help", 0, "CACHESVC_SEAWEEDFS=1 go test ./store/tiered -run SeaweedFS"},
		{"-h", 0, "SEAWEEDFS_VERSION"},
		{"--bogus", 2, "seaweedfs.sh: unknown argument --bogus (try --help)"},
		// A failed download says so and why (it exited 1 with no output).
		{"", 1, "seaweedfs.sh: cannot download github.com/seaweedfs/seaweedfs@v0.0.0-00010101000000-000000000000"},
	}
	for _, tt := range tests {
		args := []string{"../../../scripts/seaweedfs.sh"}
		if tt.arg != "" {
			args = append(args, tt.arg)
		}
		cmd := exec.Command("bash", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.wantCode || !strings.Contains(string(out), tt.want) {
			t.Errorf("seaweedfs.sh %s: exit %d, %q; want exit %d and %q", tt.arg, code, out, tt.wantCode, tt.want)
		}
	}
}
