package resp

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/redcon"
)

// resultKind is what a command's reply was, for the commands metric.
type resultKind uint8

// Results of a command.
const (
	resultOK        resultKind = iota // any reply but an error
	resultError                       // ERR and other errors
	resultNoAuth                      // NOAUTH: no token where one is needed
	resultNoPerm                      // NOPERM: the token lacks the scope
	resultWrongPass                   // WRONGPASS: an unknown token
	// resultUnsupported: a capability probe a healthy client sends and
	// carries on after declining (CLIENT MAINT_NOTIFICATIONS). It is an
	// error reply, as from a Redis without the feature, but counting it as
	// "error" would give every healthy redis-py connection an error.
	resultUnsupported
	numResults
)

// resultNames are the metric's result label values.
var resultNames = [numResults]string{"ok", "error", "noauth", "noperm", "wrongpass", "unsupported"}

// write appends raw reply bytes to the connection's writer.
func (c *conn) write(b []byte) {
	_, _ = c.w.Write(b)
	if cap(b) <= 4<<10 {
		c.scratch = b[:0]
	}
}

// replyOK writes +OK.
func (c *conn) replyOK() { c.write(redcon.AppendOK(c.scratch[:0])) }

// replyString writes a simple string.
func (c *conn) replyString(s string) { c.write(redcon.AppendString(c.scratch[:0], s)) }

// replyError writes an error reply; msg starts with its code (ERR,
// NOAUTH...) and has its line breaks replaced.
func (c *conn) replyError(msg string) {
	switch {
	case strings.HasPrefix(msg, "NOAUTH "):
		c.result = resultNoAuth
	case strings.HasPrefix(msg, "NOPERM "):
		c.result = resultNoPerm
	case strings.HasPrefix(msg, "WRONGPASS "):
		c.result = resultWrongPass
	default:
		c.result = resultError
	}
	c.write(redcon.AppendError(c.scratch[:0], oneLine(msg)))
}

// replyUnsupported declines a capability probe with an error reply counted
// as result "unsupported", not "error".
func (c *conn) replyUnsupported(msg string) {
	c.replyError(msg)
	c.result = resultUnsupported
}

// replyErrorf formats an error reply.
func (c *conn) replyErrorf(format string, args ...any) { c.replyError(fmt.Sprintf(format, args...)) }

// replyNull writes the null reply of the connection's protocol: RESP3's _
// or RESP2's null bulk string.
func (c *conn) replyNull() {
	if c.resp3 {
		c.write(append(c.scratch[:0], "_\r\n"...))
		return
	}
	c.write(redcon.AppendNull(c.scratch[:0]))
}

// replyInt writes an integer.
func (c *conn) replyInt(n int64) { c.write(redcon.AppendInt(c.scratch[:0], n)) }

// replyBulk writes a bulk string.
func (c *conn) replyBulk(b []byte) {
	c.write(fmt.Appendf(c.scratch[:0], "$%d\r\n", len(b)))
	_, _ = c.w.Write(b)
	_, _ = c.w.WriteString("\r\n")
}

// replyBulkString writes a bulk string.
func (c *conn) replyBulkString(s string) { c.replyBulk([]byte(s)) }

// replyArray writes an array header of n elements.
func (c *conn) replyArray(n int) { c.write(redcon.AppendArray(c.scratch[:0], n)) }

// replyMap writes a map header of n pairs: RESP3's %, or RESP2's flat
// array of 2n elements.
func (c *conn) replyMap(n int) {
	if c.resp3 {
		c.write(fmt.Appendf(c.scratch[:0], "%%%d\r\n", n))
		return
	}
	c.replyArray(2 * n)
}

// errSource marks a failure of the reader a bulk reply streams from, as
// opposed to the connection.
var errSource = errors.New("read entry")

// replyBulkFrom streams a bulk string of n bytes from r. An error leaves
// the reply half-written: the caller must close the connection.
func (c *conn) replyBulkFrom(n int64, r io.Reader) error {
	c.write(fmt.Appendf(c.scratch[:0], "$%d\r\n", n))
	copied, err := io.Copy(c.w, sourceReader{r})
	if err == nil && copied != n {
		err = fmt.Errorf("%w: %d of %d bytes", errSource, copied, n)
	}
	if err != nil {
		return err
	}
	_, err = c.w.WriteString("\r\n")
	return err
}

// sourceReader wraps the errors of the entry's reader in errSource.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errSource, err)
	}
	return n, err
}

// oneLine replaces CR and LF, which would end an error or simple string
// reply early.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// quoted renders client-sent bytes for a message: printable ASCII, at most
// 64 bytes, other bytes as '?'.
func quoted(b []byte) string {
	const most = 64
	cut := len(b) > most
	if cut {
		b = b[:most]
	}
	out := make([]byte, len(b))
	for i, ch := range b {
		if ch < 0x20 || ch > 0x7e || ch == '\'' {
			ch = '?'
		}
		out[i] = ch
	}
	if cut {
		return string(out) + "..."
	}
	return string(out)
}
