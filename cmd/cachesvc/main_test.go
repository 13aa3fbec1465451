package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{[]string{"--help"}, 0, "serve", ""},
		{[]string{"help"}, 0, "version", ""},
		{[]string{"--help"}, 0, "130 interrupted by SIGINT", ""},
		{nil, 2, "", "Commands:"},
		{[]string{"version"}, 0, "cachesvc ", ""},
		{[]string{"version"}, 0, "\nstore format 2 (--data), shared-tier entry records up to v2\n", ""},
		// The stats answer's format, which changed (3 to 4) where the
		// two lines above did not: an older `cachesvc stats` against a
		// newer server prints fewer figures, or some read wrong.
		{[]string{"version"}, 0, "\nstats format 4 (GET /v1/stats; stats reads formats 1 to 4)\n", ""},
		{[]string{"--version"}, 0, "cachesvc ", ""},
		// README (Upgrading) says to compare the formats `version` prints
		// before a rollback; its help and the command list said only
		// "print the version".
		{[]string{"version", "--help"}, 0, "store format", ""},
		{[]string{"--help"}, 0, "version    print the version and the data formats this binary reads", ""},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"serve", "--no-such-flag"}, 2, "", "unknown flag --no-such-flag"},
		{[]string{"serve", "extra"}, 2, "", "unexpected arguments"},
		{[]string{"serve", "--help"}, 0, "CACHESVC_MAX_ENTRY_SIZE", ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; stderr %s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

// TestEveryCommandHasHelp: `cachesvc CMD --help` (and -h) exits 0 with a
// usage text for every command, subcommand groups included.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands {
		for _, flag := range []string{"--help", "-h"} {
			t.Run(c.name+" "+flag, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), []string{c.name, flag}, strings.NewReader(""), &stdout, &stderr)
				if code != 0 || !strings.Contains(stdout.String()+stderr.String(), "Usage: cachesvc "+c.name) {
					t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
				}
			})
		}
	}
}
