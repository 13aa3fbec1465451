package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api/auth"
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

// checkStderr checks the error lines ("cachesvc CMD: message") a cachesvc
// process wrote to stderr with errorDefect: the process tests' counterpart of
// TestMain's check of in-process commands.
func checkStderr(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(line, "cachesvc ")
		if !ok {
			continue
		}
		if _, msg, ok := strings.Cut(rest, ": "); ok {
			if why := errorDefect(msg); why != "" {
				t.Errorf("%s: %s", line, why)
			}
		}
	}
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

// TestCommandErrors runs commands into the failures people meet first (a
// missing file, a taken port, no server) and checks each error once: the
// exit code, what it says, and no doubled prefix or Go internal.
func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plainfile")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() // nothing listens there
	closed.Close()
	serve := []string{"serve", "--addr", "127.0.0.1:0", "--wasm-cache", filepath.Join(dir, "wasm")}
	privKey := filepath.Join(dir, "sign.key")
	pub, err := auth.WriteKeyPair(privKey)
	if err != nil {
		t.Fatal(err)
	}
	// The public key as the Python client takes it, with no FILE beside it.
	b64Pub := filepath.Join(dir, "verify.b64")
	if err := os.WriteFile(b64Pub, []byte(auth.EncodePublicKey(pub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	entry := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"store on a file", append(serve, "--data", file), 1, "open store " + file},
		// It said only "bind: address already in use", not what to do.
		{"port taken", []string{"serve", "--addr", taken.Addr().String(), "--data", filepath.Join(dir, "d1")}, 1,
			"listen on --addr " + taken.Addr().String() + ": listen tcp " + taken.Addr().String() + ": bind: address already in use (another process listens there, perhaps another cachesvc serve: stop it, or give --addr another port, e.g. --addr 127.0.0.1:0 for a free one, which serve prints)"},
		{"redis port taken", append(serve, "--data", filepath.Join(dir, "d12"), "--redis-addr", taken.Addr().String()), 1,
			"listen on --redis-addr " + taken.Addr().String() + ": listen tcp " + taken.Addr().String() + ": bind: address already in use (another process listens there, perhaps another cachesvc serve: stop it, or give --redis-addr another port, e.g. --redis-addr " + nextPort(t, taken.Addr()) + ")"},
		{"tokens file missing", append(serve, "--data", filepath.Join(dir, "d2"), "--tokens", missing), 1, missing},
		{"pprof port taken", append(serve, "--data", filepath.Join(dir, "d4"), "--pprof-addr", taken.Addr().String()), 1, "--pprof-addr " + taken.Addr().String() + ": cannot listen for profiling"},
		{"signing key missing", append(serve, "--data", filepath.Join(dir, "d3"), "--signing-key", missing), 1, missing},
		{"signing key is the public key", append(serve, "--data", filepath.Join(dir, "d5"), "--signing-key", privKey+".pub"), 1, privKey + ".pub is a public key (what clients check signatures with, their --verify-key), not the private key entries are signed with: give the private key, " + privKey},
		{"signing key is a base64 public key", append(serve, "--data", filepath.Join(dir, "d6"), "--signing-key", b64Pub), 1, b64Pub + " is a public key"},
		{"signing key is no key", append(serve, "--data", filepath.Join(dir, "d7"), "--signing-key", file), 1, file + " is not a private key: want the private key FILE"},
		{"trusted proxy not an address", append(serve, "--data", filepath.Join(dir, "d8"), "--trusted-proxies", "127.0.0.1,nginx"), 2, `invalid value "127.0.0.1,nginx" for --trusted-proxies: "nginx" is neither an IP address nor a CIDR prefix`},
		{"trusted proxy bad prefix", append(serve, "--data", filepath.Join(dir, "d9"), "--trusted-proxies", "10.0.0.0/33"), 2, `"10.0.0.0/33" is not a CIDR prefix such as 10.0.0.0/8`},
		// Flag combinations are a bad command line (exit 2), as a partial
		// TLS configuration is.
		{"non-loopback without tokens", []string{"serve", "--addr", "0.0.0.0:0", "--data", filepath.Join(dir, "d10")}, 2, "refusing to serve without authentication on a non-loopback address \"0.0.0.0:0\": give --tokens FILE"},
		{"redis non-loopback without tokens", append(serve, "--data", filepath.Join(dir, "d11"), "--redis-addr", "0.0.0.0:0"), 2, "--redis-addr: refusing to serve without authentication"},
		{"stats no server", []string{"stats", "--url", refused}, 1, "is cachesvc serve running at " + refused},
		{"stats token file missing", []string{"stats", "--url", refused, "--token-file", missing}, 1, missing},
		{"warm no server", []string{"warm", "--url", refused, "--run", "r", "--jax-cache-dir", filepath.Join(dir, "jax")}, 1, "connection refused"},
		{"warm manifest missing", []string{"warm", "--manifest", missing, "--jax-cache-dir", filepath.Join(dir, "jax")}, 1, missing},
		{"key file missing", []string{"key", missing}, 1, missing},
		{"plugin file missing", []string{"plugin", "check", missing}, 1, missing},
		{"admin no server", []string{"admin", "list", "--url", refused}, 1, "is cachesvc serve running at " + refused},
		{"admin negative timeout", []string{"admin", "list", "--url", refused, "--timeout", "-1s"}, 2, `invalid value "-1s" for --timeout: want 0 (no limit) or more`},
		{"stats negative timeout", []string{"stats", "--url", refused, "--timeout", "-1s"}, 2, `invalid value "-1s" for --timeout: want 0 (no limit) or more`},
		// 0 is no limit, as for admin: the command gets as far as the server.
		{"stats timeout 0 is no limit", []string{"stats", "--url", refused, "--timeout", "0"}, 1, "is cachesvc serve running at " + refused},
		{"key plugin timeout 0", []string{"key", missing, "--plugin-timeout", "0"}, 2, `invalid value "0" for --plugin-timeout: want a positive duration`},
		{"plugin list negative plugin timeout", []string{"plugin", "list", "--plugin-timeout", "-1s"}, 2, `invalid value "-1s" for --plugin-timeout: want a positive duration`},
		{"agent interval too short", []string{"agent", "--url", refused, "--jax-cache-dir", filepath.Join(dir, "jax"), "--interval", "0"}, 2, `invalid value "0" for --interval: want 10ms or more`},
		{"admin token file missing", []string{"admin", "export", "--url", refused, "--token-file", missing, "-o", filepath.Join(dir, "t.tar")}, 1, missing},
		{"verify key is the private key", []string{"admin", "show", entry, "--url", refused, "--verify-key", privKey}, 1, privKey + " is a private key (the server's --signing-key), not the public key a signature is checked with: give the public key, " + privKey + ".pub"},
		{"verify key is no key", []string{"admin", "import", missing, "--namespace", "team", "--url", refused, "--verify-key", file}, 1, file + " is not a public key: want the public key FILE.pub"},
		{"signkey over a file", []string{"signkey", "new", "--out", file}, 1, file + " already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			msg := strings.TrimSpace(stderr.String())
			if code != tc.code || !strings.Contains(msg, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, msg, tc.code, tc.want)
			}
			// A script takes the "serving on" line for a started server.
			if strings.Contains(stdout.String(), "serving on") {
				t.Errorf("failed, yet stdout announced a server: %q", stdout.String())
			}
			// The error line itself: serve also logs it (JSON here),
			// so the same words are on stderr twice by design.
			checkStderr(t, msg)
		})
	}
}

// nextPort is addr with the port after its own: what the hint for a taken
// --redis-addr suggests.
func nextPort(t *testing.T, addr net.Addr) string {
	t.Helper()
	tcp := addr.(*net.TCPAddr)
	return net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port+1))
}
