package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
