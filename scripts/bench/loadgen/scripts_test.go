package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBenchScriptsMissingValue: a flag given without its value is a usage
// error that names the flag (run.sh said "line 28: $2: unbound variable").
// Nothing runs: the check comes before any build or server.
func TestBenchScriptsMissingValue(t *testing.T) {
	tests := []struct {
		script, flag, want string
	}{
		{"../run.sh", "-d", "run.sh: -d needs a value"},
		{"../run.sh", "--bazel-remote", "run.sh: --bazel-remote needs a value"},
		{"../plugins.sh", "-n", "plugins.sh: -n needs a value"},
	}
	for _, tt := range tests {
		out, err := exec.Command("bash", tt.script, tt.flag).CombinedOutput()
		code := -1
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s %s: exit %d, %q; want exit 2 and %q", tt.script, tt.flag, code, out, tt.want)
		}
	}
}
