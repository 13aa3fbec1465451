package cachekey

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNamespaceMatchesPattern: the hand-written check accepts exactly
// the strings of the documented pattern.
func TestValidNamespaceMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	cases := []string{"", "a", "0", "default", "a.b_c-d", ".a", "_a", "-a", "A", "aB", "a b", "a/b",
		"ü", "a\x00", strings.Repeat("a", 63), strings.Repeat("a", 64), "9-", "a..", "a\n"}
	// Every 1- and 2-byte string over a range that covers each class edge.
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}))
	}
	for _, ns := range cases {
		if got, want := validNamespace(ns), re.MatchString(ns); got != want {
			t.Errorf("validNamespace(%q) = %v, the pattern says %v", ns, got, want)
		}
	}
}

// TestValidateNamespaceCutsLongNames: an invalid name is quoted in the
// error cut to 80 characters (a 5 KB path segment was echoed whole).
func TestValidateNamespaceCutsLongNames(t *testing.T) {
	err := ValidateNamespace(strings.Repeat("a", 5000))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), `"`+strings.Repeat("a", 80)+`"`) {
		t.Fatalf("ValidateNamespace(5000 a's) = %v", err)
	}
}
