package main

import (
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"github.com/cachesvc/cachesvc/api/auth"
)

// The key files of 'cachesvc signkey new --out FILE' are FILE (the private
// key, serve's --signing-key) and FILE.pub (the public key, admin's and the
// clients' --verify-key). Each is easily given where the other goes, and
// the parsers' own errors for that ("not a PEM PRIVATE KEY block", an ASN.1
// structure dump) do not say so: loadSigningKey and loadVerifyKey name the
// wrong file for what it is and point at the right one.

// keyFileKind is what a file given as a key holds.
type keyFileKind int

const (
	keyNotPEM   keyFileKind = iota // no PEM block (--verify-key also takes base64)
	keyPrivate                     // a PEM block whose type ends in PRIVATE KEY
	keyPublic                      // a PEM PUBLIC KEY block
	keyOtherPEM                    // any other PEM block, such as a CERTIFICATE
)

// classifyKeyFile returns what b holds and its first PEM block (nil for
// keyNotPEM).
func classifyKeyFile(b []byte) (keyFileKind, *pem.Block) {
	blk, _ := pem.Decode(b)
	switch {
	case blk == nil:
		return keyNotPEM, nil
	case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
		return keyPrivate, blk
	case blk.Type == "PUBLIC KEY":
		return keyPublic, blk
	}
	return keyOtherPEM, blk
}

// pairedKeyFile returns the other file of path's key pair when it exists
// beside it (FILE.pub for FILE, FILE for FILE.pub), else fallback: a path
// that exists is worth naming, a guessed one is not.
func pairedKeyFile(path string, public bool, fallback string) string {
	other := path + ".pub"
	if !public {
		var ok bool
		if other, ok = strings.CutSuffix(path, ".pub"); !ok {
			return fallback
		}
	}
	if _, err := os.Stat(other); err != nil {
		return fallback
	}
	return other
}

// verifyKeyWant says what --verify-key takes, for the errors of a file
// that is not it.
const verifyKeyWant = "want the public key FILE.pub that 'cachesvc signkey new' writes beside the private FILE (PEM PUBLIC KEY), or base64 of the 32-byte Ed25519 key"

// loadVerifyKey reads --verify-key's public key, and returns it with the
// label that names it in messages (the file); nil for no file. The
// private key is the likeliest wrong file. A value that names no file but
// is a public key itself (base64, or the .pub file's text) is that key,
// labelled "key <base64>": CACHESVC_VERIFY_KEY holds it so for the Python
// client, and the same variable reaches this flag.
func loadVerifyKey(path string) (pub ed25519.PublicKey, label string, err error) {
	if path == "" {
		return nil, "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if pub, perr := auth.ParsePublicKey([]byte(path)); perr == nil {
			return pub, "key " + auth.EncodePublicKey(pub), nil
		}
		return nil, "", fmt.Errorf("read --verify-key: %w", err)
	}
	kind, blk := classifyKeyFile(b)
	switch kind {
	case keyPrivate:
		pubFile := pairedKeyFile(path, true, "its FILE.pub, written beside it by 'cachesvc signkey new'")
		return nil, "", fmt.Errorf("--verify-key %s is a private key (the server's --signing-key), not the public key a signature is checked with: give the public key, %s", path, pubFile)
	case keyOtherPEM:
		return nil, "", fmt.Errorf("--verify-key %s holds a PEM %s, not a public key: %s", path, blk.Type, verifyKeyWant)
	}
	pub, err = auth.ParsePublicKey(b)
	switch {
	case err != nil && kind == keyNotPEM:
		return nil, "", fmt.Errorf("--verify-key %s is not a public key: %s", path, verifyKeyWant)
	case err != nil:
		// A PEM PUBLIC KEY the parser refuses: its error says why (not
		// Ed25519, or damaged).
		return nil, "", fmt.Errorf("--verify-key %s: %w", path, err)
	}
	return pub, path, nil
}

// signingKeyWant says what --signing-key takes, for the errors of a file
// that is not it.
const signingKeyWant = "want the private key FILE that 'cachesvc signkey new --out FILE' writes (PEM PRIVATE KEY, Ed25519; FILE.pub beside it is the public key)"

// loadSigningKey reads serve's --signing-key. The public key is the
// likeliest wrong file.
func loadSigningKey(path string) (*auth.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --signing-key: %w", err)
	}
	kind, blk := classifyKeyFile(b)
	switch {
	case kind == keyPublic, kind == keyNotPEM && isBase64PublicKey(b):
		priv := pairedKeyFile(path, false, "the FILE beside FILE.pub that 'cachesvc signkey new' wrote")
		return nil, fmt.Errorf("--signing-key %s is a public key (what clients check signatures with, their --verify-key), not the private key entries are signed with: give the private key, %s", path, priv)
	case kind == keyNotPEM:
		return nil, fmt.Errorf("--signing-key %s is not a private key: %s", path, signingKeyWant)
	case blk.Type != "PRIVATE KEY":
		// Another PEM type, or a private key in a form other than the
		// PKCS #8 that signkey writes (RSA PRIVATE KEY, EC PRIVATE KEY).
		return nil, fmt.Errorf("--signing-key %s holds a PEM %s: %s", path, blk.Type, signingKeyWant)
	}
	// A PKCS #8 key: LoadSigner's error names the file and says why it is
	// refused (not Ed25519, or damaged).
	return auth.LoadSigner(path)
}

// isBase64PublicKey reports whether b, which holds no PEM block, is a
// public key all the same: base64 of its 32 bytes, the form the Python
// client's verify key takes.
func isBase64PublicKey(b []byte) bool {
	_, err := auth.ParsePublicKey(b)
	return err == nil
}
