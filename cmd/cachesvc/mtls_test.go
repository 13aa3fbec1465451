package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// runClient runs the client command args of bin in a process of its own,
// trusting ca (SSL_CERT_FILE is read once per process) with env added, and
// returns its exit code, stdout and stderr.
func runClient(t *testing.T, bin, ca string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "SSL_CERT_FILE="+ca), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", args[0], err)
	}
	checkStderr(t, errb.String()) // errcheck_test.go
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestClientCertificate: a real `serve --tls-client-ca` refuses the client
// commands without a client certificate, with the flags to give, and
// serves them with --client-cert/--client-key or CACHESVC_CLIENT_CERT and
// CACHESVC_CLIENT_KEY; a half or mismatched pair is refused with both named.
func TestClientCertificate(t *testing.T) {
	pki := authtest.NewPKI(t)
	bin := buildBinary(t)
	srv := startServer(t, bin, filepath.Join(t.TempDir(), "data"),
		"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--tls-client-ca", pki.CACert)
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("serve with --tls-cert serves on %s, want https", srv.url)
	}
	certFlags := []string{"--client-cert", pki.ClientCert, "--client-key", pki.ClientKey}
	certEnv := []string{"CACHESVC_CLIENT_CERT=" + pki.ClientCert, "CACHESVC_CLIENT_KEY=" + pki.ClientKey}

	for _, args := range [][]string{
		{"stats", "--url", srv.url},
		{"admin", "list", "--url", srv.url},
		{"warm", "--url", srv.url, "--run", "r", "--jax-cache-dir", t.TempDir()},
	} {
		code, out, errOut := runClient(t, bin, pki.CACert, nil, args...)
		if code != 1 || !strings.Contains(errOut, "--client-cert and --client-key") {
			t.Errorf("%s without a client certificate: exit %d, stderr %q (stdout %q); want exit 1 and the flags to give", args[0], code, errOut, out)
		}
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"stats with the flags", nil, append([]string{"stats", "--url", srv.url}, certFlags...)},
		{"admin list from the environment", certEnv, []string{"admin", "list", "--url", srv.url}},
	} {
		if code, out, errOut := runClient(t, bin, pki.CACert, tc.env, tc.args...); code != 0 {
			t.Errorf("%s: exit %d, stderr %q (stdout %q); want exit 0", tc.name, code, errOut, out)
		}
	}

	code, out, errOut := runClient(t, bin, pki.CACert, []string{"CACHESVC_CLIENT_CERT=" + pki.ClientCert}, "stats", "--url", srv.url)
	if code != 2 || !strings.Contains(errOut, "--client-cert and --client-key") {
		t.Errorf("only CACHESVC_CLIENT_CERT: exit %d, stderr %q (stdout %q); want exit 2 naming both flags", code, errOut, out)
	}
	code, out, errOut = runClient(t, bin, pki.CACert, nil, "admin", "list", "--url", srv.url, "--client-cert", pki.ClientCert, "--client-key", pki.ServerKey)
	if code != 1 || !strings.Contains(errOut, pki.ClientCert) || !strings.Contains(errOut, pki.ServerKey) || !strings.Contains(errOut, "does not match") {
		t.Errorf("mismatched key: exit %d, stderr %q (stdout %q); want exit 1 naming both files and the mismatch", code, errOut, out)
	}
}
