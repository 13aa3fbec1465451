package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestTokenNew(t *testing.T) {
	code, out, _ := runCmd(t, "token", "new", "--name", "ci", "--scopes", "default:write,*:read")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var tok, line string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "token: "); ok {
			tok = v
		}
		if v, ok := strings.CutPrefix(l, "line: "); ok {
			line = v
		}
	}
	if strings.Contains(line, tok) {
		t.Fatal("the tokens-file line contains the token")
	}
	tk, err := auth.Parse(strings.NewReader(line), "out")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tk.Authorize(tok, "default", auth.ScopeWrite); err != nil || id.Name != "ci" {
		t.Fatalf("printed token does not match its line: %+v %v", id, err)
	}
	for _, bad := range [][]string{
		{"token", "new"},
		{"token", "new", "--name", "x y"},
		{"token", "new", "--name", "x", "--scopes", "default:root"},
		{"token", "old"},
	} {
		if code, _, _ := runCmd(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// TestTokenNewBadName: a bad --name is refused naming --name and what a
// name may be, never the tokens-file line's internals.
func TestTokenNewBadName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"x y", `--name: name "x y" is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '@' or '-', starting with a letter or digit`},
		{".x", `--name: name ".x" is invalid`},
		{"#ops", `--name: name "#ops" is invalid`},
		{strings.Repeat("a", 65), `--name: name "aaaa`},
		{"anonymous", `--name: "anonymous" is reserved for requests without a token`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCmd(t, "token", "new", "--name", tc.name, "--scopes", "default:read")
			if code != 2 || out != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing printed", code, out)
			}
			if !strings.Contains(errs, tc.want) || strings.Contains(errs, "format token rule") {
				t.Errorf("stderr %q, want it to contain %q", errs, tc.want)
			}
		})
	}
}

func TestSignKeyNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sign.key")
	code, out, errs := runCmd(t, "signkey", "new", "--out", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	s, err := auth.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, auth.EncodePublicKey(s.PublicKey())) {
		t.Fatalf("output lacks the public key: %s", out)
	}
	if code, _, _ := runCmd(t, "signkey", "new", "--out", path); code != 1 {
		t.Fatalf("overwriting a key: exit %d, want 1", code)
	}
}

func TestTokenSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	os.WriteFile(file, []byte("  secret-from-file \nignored\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	tests := []struct {
		ts      tokenSource
		want    string
		wantErr bool
	}{
		{tokenSource{}, "", false},
		{tokenSource{token: "t"}, "t", false},
		{tokenSource{file: file}, "secret-from-file", false},
		{tokenSource{token: "t", file: file}, "", true},
		{tokenSource{file: empty}, "", true},
		{tokenSource{file: filepath.Join(dir, "missing")}, "", true},
	}
	for i, tc := range tests {
		got, err := tc.ts.resolve()
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("case %d: %q, %v", i, got, err)
		}
	}
}

func TestSecurityApply(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "tokens")
	os.WriteFile(corrupt, []byte("# tokens\nci "+strings.Repeat("ab", 32)+" default:read\nbob cachesvc_oops default:write\n"), 0o600)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var cfg api.Config
	err := securityOptions{Tokens: corrupt}.apply("127.0.0.1:0", &cfg, log)
	if err == nil || !strings.Contains(err.Error(), corrupt) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("corrupt tokens file: %v; want the file and line 3", err)
	}
	if strings.Contains(err.Error(), "cachesvc_oops") {
		t.Fatal("error echoes a token")
	}
	err = securityOptions{}.apply("0.0.0.0:8080", &cfg, log)
	if !errors.Is(err, auth.ErrInsecureExposure) {
		t.Fatalf("non-loopback without auth: %v", err)
	}
	if err := (securityOptions{InsecureNoAuth: true}).apply("0.0.0.0:8080", &cfg, log); err != nil {
		t.Fatalf("--insecure-no-auth: %v", err)
	}
	if err := (securityOptions{TLS: auth.TLSFiles{Cert: "x"}}).apply("127.0.0.1:0", &cfg, log); err == nil {
		t.Fatal("--tls-cert without --tls-key accepted")
	}
	if err := (securityOptions{SigningKey: filepath.Join(dir, "none")}).apply("127.0.0.1:0", &cfg, log); err == nil {
		t.Fatal("missing signing key accepted")
	}
}

// TestServeSecurityProcess runs the real binary: a corrupted tokens file or
// an exposed address without auth stop serve at once with a clear message;
// SIGHUP swaps the tokens file, and a bad file on reload keeps the old one.
func TestServeSecurityProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeRule := func(content string) {
		t.Helper()
		tmp := tokens + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokens); err != nil {
			t.Fatal(err)
		}
	}
	rule := func(name, secret, scopes string) string {
		sc, err := auth.ParseScopes(scopes)
		if err != nil {
			t.Fatal(err)
		}
		line, err := auth.FormatRule(name, auth.HashToken(secret), sc)
		if err != nil {
			t.Fatal(err)
		}
		return line + "\n"
	}

	refuse := []struct {
		name string
		args []string
		code int // 1 for a file that does not load, 2 for a bad command line
		want []string
	}{
		{"corrupt tokens", []string{"--tokens", tokens}, 1, []string{tokens, "line 2", "64 lowercase hex"}},
		{"missing tokens", []string{"--tokens", tokens + ".missing"}, 1, []string{tokens + ".missing", "no such file"}},
		{"exposed without auth", []string{"--addr", "0.0.0.0:0"}, 2, []string{"refusing to serve without authentication", "--insecure-no-auth"}},
	}
	writeRule("# a damaged file\nci not-a-hash default:write\n")
	for _, tc := range refuse {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, tc.args...)
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("serve did not refuse to start")
			}
			if cmd.ProcessState.ExitCode() != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", cmd.ProcessState.ExitCode(), tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			checkStderr(t, stderr.String()) // errcheck_test.go
		})
	}

	writeRule(rule("first", "secret-first", "default:write"))
	p := startServer(t, bin, filepath.Join(dir, "data"), "--tokens", tokens, "--log-level", "info")
	status := func(secret string) int {
		req, _ := http.NewRequest("HEAD", p.url+"/v1/default/entries/"+strings.Repeat("ab", 32), nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(secret string, want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); status(secret) != want; {
			if time.Now().After(deadline) {
				t.Fatalf("token %q: status %d, want %d after SIGHUP", secret, status(secret), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitStatus("secret-first", 404)
	waitStatus("secret-second", 401)

	writeRule(rule("second", "secret-second", "default:read"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitStatus("secret-second", 404)
	waitStatus("secret-first", 401)

	writeRule(rule("third", "secret-third", "default:read") + "broken line here\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.stderr.String(), "reload failed"); {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.stderr.String(), "line 2") {
		t.Errorf("reload failure does not name the line:\n%s", p.stderr.String())
	}
	if status("secret-second") != 404 || status("secret-third") != 401 {
		t.Fatal("a bad tokens file replaced the tokens in force")
	}
	p.stop(t, 30*time.Second)
}
