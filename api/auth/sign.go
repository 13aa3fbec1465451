package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/cachesvc/cachesvc/cachekey"
)

// SignedMessage returns the bytes an entry signature covers: the 32-byte key
// followed by the 32-byte SHA-256 of the entry's content.
func SignedMessage(key cachekey.Key, sum [32]byte) []byte {
	msg := make([]byte, 0, 64)
	msg = append(msg, key[:]...)
	return append(msg, sum[:]...)
}

// Signer signs entries with an Ed25519 private key. It is safe for
// concurrent use.
type Signer struct {
	priv ed25519.PrivateKey
}

// NewSigner returns a Signer over priv.
func NewSigner(priv ed25519.PrivateKey) *Signer { return &Signer{priv: priv} }

// LoadSigner reads a PEM "PRIVATE KEY" (PKCS #8) Ed25519 key from path, as
// written by WriteKeyPair.
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("read signing key %s: not a PEM PRIVATE KEY block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse signing key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("parse signing key %s: %T is not an Ed25519 key", path, k)
	}
	return &Signer{priv: priv}, nil
}

// Sign returns the base64 (standard, padded) Ed25519 signature of
// SignedMessage(key, sum), the value of the X-Cachesvc-Signature header.
func (s *Signer) Sign(key cachekey.Key, sum [32]byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, SignedMessage(key, sum)))
}

// PublicKey returns the public half of the signing key.
func (s *Signer) PublicKey() ed25519.PublicKey {
	return s.priv.Public().(ed25519.PublicKey)
}

// Verify reports whether sig (base64) is a valid signature of
// SignedMessage(key, sum) under pub.
func Verify(pub ed25519.PublicKey, key cachekey.Key, sum [32]byte, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(pub, SignedMessage(key, sum), raw)
}

// WriteKeyPair generates an Ed25519 key pair and writes the private key to
// privPath (PEM PKCS #8, mode 0600, refusing to overwrite) and the public
// key to privPath+".pub" (PEM PKIX). It returns the public key.
func WriteKeyPair(privPath string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("marshal signing key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	if err := writeNew(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(privPath+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, err
	}
	return pub, nil
}

// EncodePublicKey returns pub as base64 of its 32 raw bytes, the form the
// Python client's verify key takes.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey accepts an Ed25519 public key as PEM PKIX ("PUBLIC KEY")
// or as base64 of the 32 raw bytes.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("parse public key: %T is not an Ed25519 key", k)
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("parse public key: want PEM PUBLIC KEY or base64 of 32 bytes")
	}
	return ed25519.PublicKey(raw), nil
}

func writeNew(path string, data []byte, mode os.FileMode) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists: remove it, or choose another file", path)
		}
		return err // names the path
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}
