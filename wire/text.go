package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// OneLine returns s on one line (each run of white space, line breaks
// included, as one space), every other control character, and each byte
// that is not UTF-8, as U+FFFD, and at most n runes long: cut to its first
// n-1 runes and "…" when longer. For quoting names, reasons and foreign
// bodies in tables and error messages, which may reach a terminal: an
// escape sequence in a client's report must not set its colours or clear
// it.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.Map(func(r rune) rune {
		if r != ' ' && !unicode.IsPrint(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if len(s) <= n { // n bytes hold at most n runes
		return s
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// CutRunes returns s when it has at most n+1 runes, else its first n runes
// and "…": never more than n+1 runes, and never cut inside one. A byte that
// is not UTF-8 counts as one rune and is kept as it is, so that %q still
// shows it. For names quoted with %q in messages as they were sent, where
// OneLine's joined white space would hide the character that is wrong.
func CutRunes(s string, n int) string {
	if len(s) <= n+1 { // n+1 bytes hold at most n+1 runes
		return s
	}
	i := 0
	for range n {
		if i >= len(s) {
			return s
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	if i >= len(s) || utf8.RuneCountInString(s[i:]) <= 1 {
		return s
	}
	return s[:i] + "…"
}
