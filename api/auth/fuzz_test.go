package auth

import (
	"strings"
	"testing"
)

// FuzzParse checks that any tokens file either parses or fails with an
// error, never panics, and that what parses round-trips through FormatRule.
func FuzzParse(f *testing.F) {
	f.Add("ci " + strings.Repeat("ab", 32) + " default:write,*:read\nanonymous - public:read\n")
	f.Add("# comment\n\n")
	f.Add("ci zz default:read")
	f.Fuzz(func(t *testing.T, file string) {
		tk, err := Parse(strings.NewReader(file), "fuzz")
		if err != nil {
			if tk != nil {
				t.Fatal("tokens returned with an error")
			}
			return
		}
		var out strings.Builder
		for _, r := range tk.rules {
			line, err := FormatRule(r.Name, r.Hash, r.Scopes)
			if err != nil {
				t.Fatalf("FormatRule of a parsed rule: %v", err)
			}
			out.WriteString(line + "\n")
		}
		again, err := Parse(strings.NewReader(out.String()), "again")
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if again.Len() != tk.Len() {
			t.Fatalf("re-parse: %d rules, want %d", again.Len(), tk.Len())
		}
	})
}
