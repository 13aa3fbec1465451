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

// TestTestScriptUsage: scripts/test.sh --help prints its usage and the
// variables it reads (it said `unknown suite "--help"`), and an unknown
// suite is exit 2; neither runs the setup.
func TestTestScriptUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--help"}, 0, []string{"Usage: scripts/test.sh [SUITE...]", "CACHESVC_FUZZTIME", "CACHESVC_CRASH_REPEAT"}},
		{[]string{"-h"}, 0, []string{"Usage: scripts/test.sh [SUITE...]"}},
		{[]string{"pyhton"}, 2, []string{`unknown suite "pyhton"`}},
	}
	for _, tt := range tests {
		out, err := exec.Command("bash", append([]string{"../../test.sh"}, tt.args...)...).CombinedOutput()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		}
		for _, w := range tt.want {
			if code != tt.code || !strings.Contains(string(out), w) {
				t.Errorf("test.sh %v: exit %d, %q; want exit %d and %q", tt.args, code, out, tt.code, w)
			}
		}
		if strings.Contains(string(out), "=== setup") {
			t.Errorf("test.sh %v ran the setup", tt.args)
		}
	}
}
