package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The token comes from $CACHESVC_TOKEN when -token is absent, but -help must
// not print it: help output lands in terminals, CI logs and bug reports.
func TestParseFlagsToken(t *testing.T) {
	const secret = "cachesvc_SECRET"
	env := func(k string) string {
		if k == "CACHESVC_TOKEN" {
			return secret
		}
		return ""
	}
	tests := []struct {
		name      string
		args      []string
		wantToken string
		wantErr   bool
	}{
		{"from environment", nil, secret, false},
		{"flag wins", []string{"-token", "explicit"}, "explicit", false},
		{"help", []string{"-help"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			o, err := parseFlags(tt.args, env, &out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q): err %v, want error %v", tt.args, err, tt.wantErr)
			}
			if strings.Contains(out.String(), secret) {
				t.Errorf("parseFlags(%q) printed the token from $CACHESVC_TOKEN:\n%s", tt.args, out.String())
			}
			if err == nil && o.token != tt.wantToken {
				t.Errorf("parseFlags(%q): token %q, want %q", tt.args, o.token, tt.wantToken)
			}
		})
	}
}

// scripts/soak.sh --help documents itself without building, serving or
// running anything (it used to build both programs and start a server).
func TestSoakScriptHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		out, err := exec.Command("bash", "../soak.sh", arg).CombinedOutput()
		if err != nil {
			t.Fatalf("soak.sh %s: %v\n%s", arg, err, out)
		}
		s := string(out)
		if strings.Contains(s, "soak: building") || !strings.Contains(s, "scripts/soak.sh --minutes") {
			t.Errorf("soak.sh %s: got\n%s\nwant the script's usage, nothing built", arg, s)
		}
	}
}
