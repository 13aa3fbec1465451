// Package cachekey holds what names an entry: its key and its namespace.
//
// It imports nothing but the standard library, so that packages which only
// pass keys around (keying, lease, manifest, jaxsync, the Go client) do not
// link the store and its Badger.
package cachekey

import (
	"encoding/hex"
	"fmt"
)

// KeySize is the length of a key in bytes.
const KeySize = 32

// Key is a cache key: the SHA-256 of a canonical signature or of a client's
// own stable key. Its text form is 64 lowercase hex characters.
type Key [KeySize]byte

// String returns the key as 64 lowercase hex characters.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// ParseKey parses 64 lowercase hex characters into a Key.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != 2*KeySize {
		return k, fmt.Errorf("key must be 64 lowercase hex characters, got %d characters", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return k, fmt.Errorf("key must be 64 lowercase hex characters, found %q at position %d", c, i)
		}
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return k, fmt.Errorf("parse key: %w", err)
	}
	return k, nil
}

// DefaultNamespace is the namespace that always exists.
const DefaultNamespace = "default"

// validNamespace reports whether ns matches ^[a-z0-9][a-z0-9._-]{0,62}$,
// by hand: it runs twice per request (API and store), where the regular
// expression was ~3% of a 4 KiB GET's CPU.
func validNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > 63 {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidateNamespace reports whether ns is a valid namespace name:
// `[a-z0-9][a-z0-9._-]{0,62}`.
func ValidateNamespace(ns string) error {
	if !validNamespace(ns) {
		return fmt.Errorf("namespace %.80q is invalid: use 1 to 63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", ns)
	}
	return nil
}
