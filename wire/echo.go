package wire

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TokenPrefix starts every bearer token cachesvc makes (auth.NewToken), so
// that secret scanners and Echo can tell one.
const TokenPrefix = "cachesvc_"

// Bounds of Echo: a refused value longer than EchoMaxBytes is shown by its
// first EchoPrefixRunes characters and its length only.
const (
	EchoMaxBytes    = 16
	EchoPrefixRunes = 4
)

// Echo quotes v, a value a request or command line sent that is being
// refused, for an error message or a log line. Messages and logs must not
// carry secrets, and a value in the wrong place (a token pasted as ?wait=,
// or as X-Cachesvc-Backend) may be one: so a value longer than
// EchoMaxBytes, which no short typo is and every token (52 bytes) is, is
// shown as its first EchoPrefixRunes characters and its length, e.g.
// `"cach"... (52 bytes, not shown in full: a long value may be a secret)`
// (ASCII only: the message may be JSON-escaped or read on any terminal).
// So is a shorter value that starts with TokenPrefix: the start of a token
// cut short when pasted is still part of a secret.
// Every message that quotes a refused value of unknown shape uses it, so
// that the rule is kept in one place; a value that parsed as a number, a
// time or a duration is no secret and may be quoted as it is.
func Echo(v string) string {
	if len(v) <= EchoMaxBytes && !strings.HasPrefix(v, TokenPrefix) {
		return strconv.QuoteToASCII(v)
	}
	i := 0
	for n := 0; n < EchoPrefixRunes && i < len(v); n++ {
		_, w := utf8.DecodeRuneInString(v[i:])
		i += w
	}
	return fmt.Sprintf("%s... (%d bytes, not shown in full: a long value may be a secret)", strconv.QuoteToASCII(v[:i]), len(v))
}
