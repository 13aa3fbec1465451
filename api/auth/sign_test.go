package auth

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
)

func TestSignVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signing.key")
	pub, err := WriteKeyPair(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteKeyPair(path); err == nil {
		t.Fatal("WriteKeyPair overwrote an existing key")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi.Mode(), err)
	}
	s, err := LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub2, err := ParsePublicKey(pubPEM)
	if err != nil || !pub2.Equal(pub) || !s.PublicKey().Equal(pub) {
		t.Fatalf("public keys differ: %v", err)
	}
	var key cachekey.Key
	key[0] = 7
	sum := sha256.Sum256([]byte("executable"))
	sig := s.Sign(key, sum)
	tests := []struct {
		name string
		key  cachekey.Key
		sum  [32]byte
		sig  string
		want bool
	}{
		{"good", key, sum, sig, true},
		{"other key", cachekey.Key{8}, sum, sig, false},
		{"other content", key, sha256.Sum256([]byte("poison")), sig, false},
		{"not base64", key, sum, "!!" + sig[2:], false},
		{"short", key, sum, sig[:20], false},
		{"empty", key, sum, "", false},
	}
	for _, tc := range tests {
		if got := Verify(pub, tc.key, tc.sum, tc.sig); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLoadSignerErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	for _, p := range []string{bad, filepath.Join(dir, "missing")} {
		if _, err := LoadSigner(p); err == nil || !strings.Contains(err.Error(), "signing key") {
			t.Errorf("LoadSigner(%s) = %v", p, err)
		}
	}
	if _, err := ParsePublicKey([]byte("AAAA")); err == nil {
		t.Error("ParsePublicKey accepted 3 bytes")
	}
}
