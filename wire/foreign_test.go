package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestForeignAnswer(t *testing.T) {
	long := strings.Repeat("é", 200) // two bytes each: the cut must not split one
	tests := []struct {
		name        string
		status      int
		ctype, body string
		want        string
	}{
		{"empty body", 404, "", "", `not a cachesvc answer (an empty body): check that the URL is the cachesvc server's`},
		{"blank body", 404, "text/html", " \n\t", `not a cachesvc answer (an empty body): check that the URL is the cachesvc server's`},
		{"proxy's empty 502", 502, "text/html", "",
			`not a cachesvc answer (an empty body): a proxy in front of cachesvc could not reach it: check that cachesvc serve runs at the proxy's upstream address`},
		{"one line", 404, "text/html", "<html>\n  <title>404 Not Found</title>\n</html>",
			`not a cachesvc answer (text/html: "<html> <title>404 Not Found</title> </html>"): check that the URL is the cachesvc server's`},
		{"no content type", 400, "", "nope", `not a cachesvc answer (no Content-Type: "nope"): check that the URL is the cachesvc server's`},
		{"long body cut", 403, "text/plain", long,
			`not a cachesvc answer (text/plain: "` + strings.Repeat("é", foreignExcerptRunes-1) + `…"): check that the URL is the cachesvc server's`},
		{"proxy's 413", 413, "text/html", "<html><title>413 Request Entity Too Large</title></html>",
			`not a cachesvc answer (text/html: "<html><title>413 Request Entity Too Large</title></html>"): a proxy in front of cachesvc refused the body as too large: lift its limit (nginx: client_max_body_size 0; cachesvc applies --max-entry-size itself)`},
		{"proxy's 502", 502, "text/html", "<title>502 Bad Gateway</title>",
			`not a cachesvc answer (text/html: "<title>502 Bad Gateway</title>"): a proxy in front of cachesvc could not reach it: check that cachesvc serve runs at the proxy's upstream address`},
		{"proxy's 504", 504, "text/html", "<title>504 Gateway Time-out</title>",
			`not a cachesvc answer (text/html: "<title>504 Gateway Time-out</title>"): a proxy in front of cachesvc stopped waiting for its answer: raise its read timeout above the longest ?wait= long poll, 300 s (nginx: proxy_read_timeout 330s)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ForeignAnswer(tc.status, tc.ctype, []byte(tc.body))
			if got != tc.want {
				t.Errorf("ForeignAnswer = %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("ForeignAnswer = %q: not valid UTF-8", got)
			}
		})
	}
}
