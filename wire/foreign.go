package wire

import "net/http"

// foreignExcerptRunes bounds the excerpt of a foreign answer's body that
// ForeignAnswer quotes: enough to recognise an S3 XML error or a proxy's
// HTML title, not a whole page in one error line.
const foreignExcerptRunes = 160

// proxyAdvice says, for the statuses a reverse proxy answers on its own,
// what to change there. cachesvc answers each of them in JSON, so a
// foreign body with one of them is the proxy's (README, "Behind a reverse
// proxy").
var proxyAdvice = map[int]string{
	http.StatusRequestEntityTooLarge: "a proxy in front of cachesvc refused the body as too large: lift its limit (nginx: client_max_body_size 0; cachesvc applies --max-entry-size itself)",
	http.StatusBadGateway:            "a proxy in front of cachesvc could not reach it: check that cachesvc serve runs at the proxy's upstream address",
	http.StatusServiceUnavailable:    "a proxy in front of cachesvc has no server to send to: check that cachesvc serve runs at the proxy's upstream address",
	http.StatusGatewayTimeout:        "a proxy in front of cachesvc stopped waiting for its answer: raise its read timeout above the longest ?wait= long poll, 300 s (nginx: proxy_read_timeout 330s)",
}

// ForeignAnswer describes an error response whose body is not cachesvc's
// JSON error ({"error": {"code", "message"}}): typically --url pointing at
// another service (the fleet's S3 endpoint, a proxy's error page). It
// quotes the start of body on one line, with its Content-Type, and says
// what to check: the proxy's setting for a status a proxy answers on its
// own, else the URL. An empty body is foreign too: cachesvc's errors always
// have one, except a HEAD's, which the caller must not pass here (a bare
// "HTTP 404" read like cachesvc's own miss, with the URL wrong).
func ForeignAnswer(status int, contentType string, body []byte) string {
	advice, ok := proxyAdvice[status]
	if !ok {
		advice = "check that the URL is the cachesvc server's"
	}
	s := OneLine(string(body), foreignExcerptRunes)
	if s == "" {
		return "not a cachesvc answer (an empty body): " + advice
	}
	if contentType == "" {
		contentType = "no Content-Type"
	}
	return "not a cachesvc answer (" + contentType + `: "` + s + `"): ` + advice
}
