package wire

// foreignExcerptRunes bounds the excerpt of a foreign answer's body that
// ForeignAnswer quotes: enough to recognise an S3 XML error or a proxy's
// HTML title, not a whole page in one error line.
const foreignExcerptRunes = 160

// ForeignAnswer describes an error response whose body is not cachesvc's
// JSON error ({"error": {"code", "message"}}): typically --url pointing at
// another service (the fleet's S3 endpoint, a proxy's error page). It
// quotes the start of body on one line, with its Content-Type, and says to
// check the URL; an empty body gives "" (the status text says it all).
func ForeignAnswer(contentType string, body []byte) string {
	s := OneLine(string(body), foreignExcerptRunes)
	if s == "" {
		return ""
	}
	if contentType == "" {
		contentType = "no Content-Type"
	}
	return "not a cachesvc answer (" + contentType + `: "` + s + `"): check that the URL is the cachesvc server's`
}
