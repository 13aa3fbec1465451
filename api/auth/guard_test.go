package auth

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuardWarnsWhenTheFileGrantsNothing checks that a tokens file without
// token lines or an anonymous rule loads (removing the last line revokes
// its token) but is warned about, at start and on reload, while a file that
// grants something is not.
func TestGuardWarnsWhenTheFileGrantsNothing(t *testing.T) {
	const rule = "alice 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 team:write\n"
	tests := []struct {
		name, start, reload string
		warnings            int
	}{
		{"empty at start", "", rule, 1},
		{"comments only at start", "# nobody yet\n\n", rule, 1},
		{"emptied on reload", rule, "", 1},
		{"anonymous rule only", "anonymous - team:read\n", "anonymous - team:read\n", 0},
		{"a token", rule, rule, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(tc.start), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			g, err := NewGuard(path, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.reload), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := g.Reload(); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), "every request is refused with 401"); n != tc.warnings {
				t.Errorf("%d warnings, want %d; logs:\n%s", n, tc.warnings, logs.String())
			}
			if tc.warnings > 0 && !strings.Contains(logs.String(), "file="+path) {
				t.Errorf("the warning does not name the file: %s", logs.String())
			}
		})
	}
}
