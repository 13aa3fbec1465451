package client

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// maxWarningsSeen bounds the distinct warnings a Client remembers having
// logged; past it, new ones are no longer logged (a server that varies its
// warnings per request would otherwise fill the log).
const maxWarningsSeen = 64

// warnings remembers which Warning texts a Client has logged.
type warnings struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// noteWarnings logs, once per Client, each distinct Warning header of resp:
// a cachesvc server names there a field of the request's JSON body that it
// ignored because it does not know it (it is older than this client), e.g.
// `299 - "unknown field \"priority\" ignored"`.
func (c *Client) noteWarnings(req *http.Request, resp *http.Response) {
	values := resp.Header.Values("Warning")
	if len(values) == 0 {
		return
	}
	log := c.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, v := range values {
		text := warningText(v)
		c.warned.mu.Lock()
		_, dup := c.warned.seen[text]
		full := len(c.warned.seen) >= maxWarningsSeen
		if !dup && !full {
			if c.warned.seen == nil {
				c.warned.seen = map[string]struct{}{}
			}
			c.warned.seen[text] = struct{}{}
		}
		c.warned.mu.Unlock()
		if !dup && !full {
			log.Warn("the server ignored part of a request", "warning", text, "method", req.Method, "path", req.URL.Path)
		}
	}
}

// warningText returns the text of a Warning header value
// (`code agent "text" ["date"]`, RFC 7234 section 5.5) unquoted, or the
// value itself when it is not of that form.
func warningText(v string) string {
	_, rest, ok := strings.Cut(v, " ") // the code
	if ok {
		_, rest, ok = strings.Cut(rest, " ") // the agent
	}
	if !ok || !strings.HasPrefix(rest, `"`) {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(rest); i++ {
		switch ch := rest[i]; ch {
		case '"':
			return b.String()
		case '\\':
			if i+1 < len(rest) {
				i++
				b.WriteByte(rest[i])
			}
		default:
			b.WriteByte(ch)
		}
	}
	return v // unterminated
}
