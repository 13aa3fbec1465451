package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestMain checks every error a command ends with, in every test of this
// package that runs a command in-process (through run or dispatch), for a
// doubled prefix or a leaked Go internal (see errorDefect).
func TestMain(m *testing.M) {
	var mu sync.Mutex
	var bad []string
	observeError = func(cmd, msg string) {
		if why := errorDefect(msg); why != "" {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("cachesvc %s: %s\n\t%s", cmd, msg, why))
			mu.Unlock()
		}
	}
	code := m.Run()
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d command errors printed by the tests are defective:\n%s\n", len(bad), strings.Join(bad, "\n"))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// goInternals are fragments of messages meant for Go programmers, not for
// the person running the command.
var goInternals = []string{"Go struct field", "%!", "*errors.", "<nil>", "runtime error"}

// errorDefect says what is wrong with an error message, or "" if nothing:
// a prefix that repeats ("open store X: open store X: ...", `get URL: Get
// "URL": ...`: two ": "-separated parts equal but for case and quotes, or
// one part the start of the next) or a Go internal.
func errorDefect(msg string) string {
	for _, g := range goInternals {
		if strings.Contains(msg, g) {
			return fmt.Sprintf("leaks the Go internal %q", g)
		}
	}
	norm := strings.NewReplacer(`"`, "", "'", "", "`", "")
	var parts []string
	for _, p := range strings.Split(msg, ": ") {
		parts = append(parts, strings.ToLower(strings.TrimSpace(norm.Replace(p))))
	}
	for i, a := range parts {
		if len(a) < 6 {
			continue
		}
		for j := i + 1; j < len(parts); j++ {
			if parts[j] == a {
				return fmt.Sprintf("repeats %q", a)
			}
		}
		if i+1 < len(parts) && strings.HasPrefix(parts[i+1], a+" ") {
			return fmt.Sprintf("repeats %q in the next part %q", a, parts[i+1])
		}
	}
	return ""
}

func TestErrorDefect(t *testing.T) {
	tests := []struct {
		msg  string
		want bool
	}{
		{"open store /d: open store /d: no space left on device", true},
		{`get http://h/v1/stats: Get "http://h/v1/stats": dial tcp: connection refused`, true},
		{"load tokens: load tokens /t: line 3: bad scope", true},
		{`json: cannot unmarshal string into Go struct field leaseRequest.ttl_s of type float64`, true},
		{"fetch manifest of run \"r\": server said 404 not_found: no run r", false},
		{"open store /d: open /d/MANIFEST: permission denied", false},
		{`Get "http://127.0.0.1:1/v1/stats": dial tcp 127.0.0.1:1: connect: connection refused`, false},
		{"read plugin: open x.wasm: no such file or directory", false},
		{"--name is required", false},
	}
	for _, tc := range tests {
		if got := errorDefect(tc.msg); (got != "") != tc.want {
			t.Errorf("errorDefect(%q) = %q, want defect %v", tc.msg, got, tc.want)
		}
	}
}
