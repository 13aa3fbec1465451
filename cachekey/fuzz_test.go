package cachekey

import (
	"strings"
	"testing"
)

// FuzzParseKey checks that ParseKey accepts exactly 64 lowercase hex
// characters and that what it accepts round-trips through String.
func FuzzParseKey(f *testing.F) {
	f.Add(strings.Repeat("0", 64))
	f.Add(strings.Repeat("ab", 32))
	f.Add(strings.Repeat("AB", 32))
	f.Add("xyz")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		valid := len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
		if (err == nil) != valid {
			t.Fatalf("ParseKey(%q) err = %v, valid = %v", s, err, valid)
		}
		if err == nil && k.String() != s {
			t.Fatalf("ParseKey(%q).String() = %q", s, k.String())
		}
	})
}

// FuzzValidateNamespace checks ValidateNamespace against a plain reading of
// the rule: 1 to 63 characters of [a-z0-9._-], the first alphanumeric.
func FuzzValidateNamespace(f *testing.F) {
	f.Add("default")
	f.Add("team-a.b_c")
	f.Add("-bad")
	f.Add(strings.Repeat("a", 64))
	f.Add("Ünïcode")
	f.Fuzz(func(t *testing.T, ns string) {
		want := len(ns) >= 1 && len(ns) <= 63
		for i := 0; want && i < len(ns); i++ {
			c := ns[i]
			alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
			want = alnum || i > 0 && (c == '.' || c == '_' || c == '-')
		}
		if err := ValidateNamespace(ns); (err == nil) != want {
			t.Fatalf("ValidateNamespace(%q) = %v, want valid=%v", ns, err, want)
		}
	})
}
