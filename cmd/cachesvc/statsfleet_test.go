package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestStatsScopeFleetDuringOutage: with the shared tier's S3 server down,
// `stats --scope fleet` fails (the heartbeats live in the bucket) saying so
// and pointing at the replica's own figures, which `stats` without the scope
// then shows. Before, it printed only the 503's message, and the person on
// call, mid-outage, was left to find out that the replica still answers for
// itself.
func TestStatsScopeFleetDuringOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := newFleet(t)
	a := f.replica(t)
	f.s3.Stop()
	stats := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"stats", "--url", a.url}, args...), nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in stderr (failure) or stdout
	}{
		{"fleet", []string{"--scope", "fleet"}, 1, []string{"fleet_unavailable", "cachesvc stats without --scope fleet shows this replica's own figures"}},
		{"replica", nil, 0, []string{"Lookups", "Shared tier"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := stats(tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			text := out
			if code != 0 {
				text = errOut
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}
