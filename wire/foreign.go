package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// foreignExcerptBytes bounds the excerpt of a foreign answer's body that
// ForeignAnswer quotes: enough to recognise an S3 XML error or a proxy's
// HTML title, not a whole page in one error line.
const foreignExcerptBytes = 160

// ForeignAnswer describes an error response whose body is not cachesvc's
// JSON error ({"error": {"code", "message"}}): typically --url pointing at
// another service (the fleet's S3 endpoint, a proxy's error page). It
// quotes the start of body on one line, with its Content-Type, and says to
// check the URL; an empty body gives "" (the status text says it all).
func ForeignAnswer(contentType string, body []byte) string {
	s := strings.Join(strings.FieldsFunc(string(body), unicode.IsSpace), " ")
	if s == "" {
		return ""
	}
	if len(s) > foreignExcerptBytes {
		cut := foreignExcerptBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if contentType == "" {
		contentType = "no Content-Type"
	}
	return "not a cachesvc answer (" + contentType + `: "` + s + `"): check that the URL is the cachesvc server's`
}
