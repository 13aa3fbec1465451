package auth

import (
	"strings"
	"testing"
)

// TestTokensDigest: the digest a fleet replica publishes of its tokens
// agrees for files that differ only in order, spacing and comments, and
// differs for a rotated token, a changed scope, a removed line or an added
// anonymous rule.
func TestTokensDigest(t *testing.T) {
	h1, h2, h3 := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("ef", 32)
	base := "ci " + h1 + " default:write,team-a:read\nops " + h2 + " *:admin\n"
	tests := []struct {
		name string
		file string
		same bool // the same digest as base's
	}{
		{"reordered, comments and spacing", "# ops first\nops   " + h2 + "   *:admin\n\nci " + h1 + " default:write,team-a:read\n", true},
		{"scopes listed in another order", "ci " + h1 + " team-a:read,default:write\nops " + h2 + " *:admin\n", true},
		{"a rotated token under the same name", "ci " + h3 + " default:write,team-a:read\nops " + h2 + " *:admin\n", false},
		{"a rotation: a new name, the old line gone", "ci-2 " + h3 + " default:write,team-a:read\nops " + h2 + " *:admin\n", false},
		{"a changed scope", "ci " + h1 + " default:read,team-a:read\nops " + h2 + " *:admin\n", false},
		{"a line removed", "ops " + h2 + " *:admin\n", false},
		{"an anonymous rule added", base + "anonymous - public:read\n", false},
	}
	parse := func(file string) *Tokens {
		t.Helper()
		tk, err := Parse(strings.NewReader(file), "tokens")
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	want := parse(base).Digest()
	if !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+12 {
		t.Fatalf("digest %q, want sha256:<12 hex>", want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(tt.file).Digest(); (got == want) != tt.same {
				t.Errorf("digest %s, base's %s: same = %v, want %v", got, want, got == want, tt.same)
			}
		})
	}
}
