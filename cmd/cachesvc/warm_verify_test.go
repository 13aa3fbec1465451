package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// TestWarmVerifyKey: with --verify-key (or CACHESVC_VERIFY_KEY, as the
// Python client reads it), warm writes only entries the server signed with
// that key; an unsigned or otherwise signed entry is never placed where
// stock JAX would load it, and warm says so and exits 1.
func TestWarmVerifyKey(t *testing.T) {
	keys := t.TempDir()
	signer := newSigner(t, filepath.Join(keys, "sign.key")) // admin_test.go
	newSigner(t, filepath.Join(keys, "other.key"))
	newSigner(t, filepath.Join(keys, "third.key"))
	signPub, otherPub, thirdPub := filepath.Join(keys, "sign.key.pub"), filepath.Join(keys, "other.key.pub"), filepath.Join(keys, "third.key.pub")
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	signed := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k; c.Signer = signer }})
	unsigned := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	src := t.TempDir()
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(src, jaxName(i)+"-cache"), jaxFile(strings.Repeat("v", 100*i)), 0o644)
	}
	for _, srv := range []*apitest.Server{signed, unsigned} {
		state := filepath.Join(t.TempDir(), "agent.json")
		if code, out, errOut := runCmd(t, "agent", "--url", srv.URL, "--jax-cache-dir", src, "--state-file", state, "--run", "v", "--once", "--interval", "20ms"); code != 0 {
			t.Fatalf("agent: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	pubPEM, err := os.ReadFile(filepath.Join(keys, "sign.key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := auth.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, err := os.ReadFile(otherPub)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url  string
		verifyKeys []string // each one --verify-key
		env        string
		code       int
		written    int
		want       string
	}{
		{"right key", signed.URL, []string{signPub}, "", 0, 3, "3 written"},
		{"right key from the environment", signed.URL, nil, string(pubPEM), 0, 3, "3 written"},
		{"other key", signed.URL, []string{otherPub}, "", 1, 0, "does not verify with " + otherPub},
		{"unsigned server", unsigned.URL, []string{signPub}, "", 1, 0, "it is unsigned"},
		{"private key given", signed.URL, []string{filepath.Join(keys, "sign.key")}, "", 1, 0, "is a private key"},
		// A key rotation: the new key and the old are both trusted.
		{"new and old key, comma-separated", signed.URL, []string{otherPub + "," + signPub}, "", 0, 3, "3 written"},
		{"old and new key, flag repeated", signed.URL, []string{signPub, otherPub}, "", 0, 3, "3 written"},
		{"new and old key from the environment", signed.URL, nil, string(otherPEM) + "," + auth.EncodePublicKey(pub), 0, 3, "3 written"},
		{"new and old key from the environment, space-separated", signed.URL, nil, otherPub + " " + auth.EncodePublicKey(pub), 0, 3, "3 written"},
		{"neither of two keys", signed.URL, []string{otherPub + "," + thirdPub}, "", 1, 0, "does not verify with any of the 2 keys " + otherPub + ", " + thirdPub},
		{"command line replaces the environment", signed.URL, []string{signPub}, otherPub, 0, 3, "3 written"},
		{"only separators", signed.URL, []string{" , "}, "", 1, 0, `--verify-key " , " holds no key`},
		{"second key malformed", signed.URL, []string{signPub + ",bad!"}, "", 1, 0, "read --verify-key: open bad!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("CACHESVC_VERIFY_KEY", tt.env)
			}
			dst := t.TempDir()
			args := []string{"warm", "--url", tt.url, "--run", "v", "--jax-cache-dir", dst}
			for _, v := range tt.verifyKeys {
				args = append(args, "--verify-key", v)
			}
			code, out, errOut := runCmd(t, args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, tt.code, tt.want)
			}
			files, _ := filepath.Glob(filepath.Join(dst, "*-cache"))
			if len(files) != tt.written {
				t.Fatalf("%d files written, want %d: %v", len(files), tt.written, files)
			}
		})
	}
}
