package main

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestScriptsHelp: every script's --help and -h print its usage as text, not
// as the raw "# " comment lines of its header, and run nothing: no go,
// python3 or nvidia-smi (promtool.sh --help started a 10-minute build,
// build-plugins.sh built into a directory named "--help", gpu-check.sh
// took "--help" for its binary).
func TestScriptsHelp(t *testing.T) {
	tests := []struct {
		script, usage string
	}{
		{"../run.sh", "scripts/bench/run.sh [-d SECONDS]"},
		{"../plugins.sh", "scripts/bench/plugins.sh [-n COUNT]"},
		{"../memory.sh", "scripts/bench/memory.sh [ENTRIES]"},
		{"../../build-plugins.sh", "scripts/build-plugins.sh OUTDIR"},
		{"../../promtool.sh", "scripts/promtool.sh"},
		{"../../gpu-check.sh", "scripts/gpu-check.sh [path/to/cachesvc]"},
		{"../../seaweedfs.sh", "scripts/seaweedfs.sh"},
		{"../../third-party.sh", "third-party.sh check|test|sync"},
		{"../../test.sh", "Usage: scripts/test.sh [SUITE...]"},
	}
	// Stubs that record being run, ahead of the real tools on PATH.
	stubs := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	for _, name := range []string{"go", "python3", "python", "nvidia-smi", "apt-get", "nginx"} {
		stub := "#!/bin/sh\necho " + name + " >>" + ran + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		for _, arg := range []string{"--help", "-h"} {
			t.Run(filepath.Base(tt.script)+" "+arg, func(t *testing.T) {
				os.Remove(ran)
				cmd := exec.Command("bash", tt.script, arg)
				cmd.Env = append(os.Environ(), "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"))
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", tt.script, arg, err, out)
				}
				s := string(out)
				if !strings.Contains(s, tt.usage) {
					t.Errorf("%s %s: got\n%s\nwant its usage, with %q", tt.script, arg, s, tt.usage)
				}
				for _, line := range strings.Split(s, "\n") {
					if strings.HasPrefix(line, "#") {
						t.Errorf("%s %s: raw comment line %q in\n%s", tt.script, arg, line, s)
						break
					}
				}
				if b, err := os.ReadFile(ran); err == nil {
					t.Errorf("%s %s ran %s", tt.script, arg, strings.Fields(string(b)))
				}
			})
		}
	}
}
