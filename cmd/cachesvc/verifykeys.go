package main

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
)

// A signing key is rotated on a fleet without a window in which clients
// refuse every entry (and compile instead) by trusting a set of keys: the
// old and the new while the servers change their --signing-key. Hence
// --verify-key is repeatable and each value may hold several keys
// separated by commas or whitespace, as CACHESVC_VERIFY_KEY does for the
// Python client.

// verifyKeyFlag is the value of --verify-key. A value set from the
// environment (CACHESVC_VERIFY_KEY) is replaced, not extended, by the
// command line's.
type verifyKeyFlag struct {
	vals    []string
	fromEnv bool
}

// String returns the values given, joined by commas.
func (f *verifyKeyFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.vals, ",")
}

// Set adds one value: a key, a key file, or several of them.
func (f *verifyKeyFlag) Set(v string) error {
	if f.fromEnv {
		f.vals, f.fromEnv = nil, false
	}
	f.vals = append(f.vals, v)
	return nil
}

// markFromEnv is called by parseFlags right after it set the value from
// the environment.
func (f *verifyKeyFlag) markFromEnv() { f.fromEnv = true }

// load reads every key given; nil when none was.
func (f *verifyKeyFlag) load() (verifyKeys, error) {
	var ks verifyKeys
	for _, v := range f.vals {
		items := splitVerifyKeys(v)
		if len(items) == 0 && strings.TrimSpace(v) != "" {
			// Only separators: checking nothing would trust every entry.
			return nil, fmt.Errorf("--verify-key %q holds no key: %s", v, verifyKeyWant)
		}
		for _, item := range items {
			pub, label, err := loadVerifyKey(item) // keyfiles.go
			if err != nil {
				return nil, err
			}
			ks = append(ks, verifyKey{pub: pub, label: label})
		}
	}
	return ks, nil
}

// pemBlock matches a PEM block, whose line breaks are no separators.
var pemBlock = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----`)

// splitVerifyKeys splits one --verify-key value into its keys or key
// files: its PEM blocks, then the rest's fields separated by commas or
// whitespace (neither occurs in base64). A value naming an existing file
// is that file, whatever its name holds.
func splitVerifyKeys(v string) []string {
	if _, err := os.Stat(v); err == nil {
		return []string{v}
	}
	items := pemBlock.FindAllString(v, -1)
	rest := pemBlock.ReplaceAllString(v, ",")
	items = append(items, strings.FieldsFunc(rest, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})...)
	return items
}

// verifyKey is one trusted public key and what names it in messages (its
// file, or "key <base64>").
type verifyKey struct {
	pub   ed25519.PublicKey
	label string
}

// verifyKeys is the set of trusted public keys: an entry's signature is
// valid when it verifies under any of them.
type verifyKeys []verifyKey

// verify returns the label of the key sig (of key ‖ sum) verifies under,
// and false when it verifies under none.
func (ks verifyKeys) verify(key cachekey.Key, sum [32]byte, sig string) (string, bool) {
	for _, k := range ks {
		if auth.Verify(k.pub, key, sum, sig) {
			return k.label, true
		}
	}
	return "", false
}

// String names the keys for messages: "FILE", or "any of the 2 keys FILE,
// key <base64>".
func (ks verifyKeys) String() string {
	if len(ks) == 1 {
		return ks[0].label
	}
	labels := make([]string, len(ks))
	for i, k := range ks {
		labels[i] = k.label
	}
	return fmt.Sprintf("any of the %d keys %s", len(ks), strings.Join(labels, ", "))
}
