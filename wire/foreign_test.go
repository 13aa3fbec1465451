package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestForeignAnswer(t *testing.T) {
	long := strings.Repeat("é", 200) // two bytes each: the cut must not split one
	tests := []struct {
		name, ctype, body, want string
	}{
		{"empty body", "text/html", "", ""},
		{"blank body", "text/html", " \n\t", ""},
		{"one line", "text/html", "<html>\n  <title>502 Bad Gateway</title>\n</html>",
			`not a cachesvc answer (text/html: "<html> <title>502 Bad Gateway</title> </html>"): check that the URL is the cachesvc server's`},
		{"no content type", "", "nope", `not a cachesvc answer (no Content-Type: "nope"): check that the URL is the cachesvc server's`},
		{"long body cut", "text/plain", long,
			`not a cachesvc answer (text/plain: "` + strings.Repeat("é", foreignExcerptRunes-1) + `…"): check that the URL is the cachesvc server's`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ForeignAnswer(tc.ctype, []byte(tc.body))
			if got != tc.want {
				t.Errorf("ForeignAnswer = %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("ForeignAnswer = %q: not valid UTF-8", got)
			}
		})
	}
}
